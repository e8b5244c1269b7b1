// Byte access into a weight buffer bound as `w: array<u32>`. Quantized blocks are packed with no
// padding (Q6_K blocks are 210 bytes, Q8_0 34), so fields sit at any byte offset.

fn byte_at(off: u32) -> u32 {
    return (w[off >> 2u] >> ((off & 3u) * 8u)) & 0xffu;
}

fn i8_at(off: u32) -> i32 {
    return (i32(byte_at(off)) << 24u) >> 24u;
}

fn u16_at(off: u32) -> u32 {
    return byte_at(off) | (byte_at(off + 1u) << 8u);
}

fn f16_at(off: u32) -> f32 {
    return half_to_f32(u16_at(off));
}

fn u32_at(off: u32) -> u32 {
    return u16_at(off) | (u16_at(off + 2u) << 16u);
}
