// Four packed quants of a word as floats, for the Q4_K and Q6_K span readers and f16 decoders:
// the low or high nibbles of its four bytes, or (Q6_K) nibbles with two more bits on top.

fn low_nibbles(v: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(v & 0x0f0f0f0fu));
}

fn high_nibbles(v: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((v >> 4u) & 0x0f0f0f0fu));
}

fn six_bits(nibbles: u32, high_pairs: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((nibbles & 0x0f0f0f0fu) | ((high_pairs & 0x03030303u) << 4u)));
}
