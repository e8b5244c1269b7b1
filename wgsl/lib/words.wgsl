// Whole words at any even byte offset of a weight buffer bound as `w: array<u32>` (Q6_K and
// Q8_0 blocks are 210 and 34 bytes, so every other block starts half-way through a word).

fn word_at(off: u32) -> u32 {
    // Without a branch: neighbouring invocations read blocks of both alignments.
    let i = off >> 2u;
    let shift = (off & 2u) * 8u;
    return (w[i] >> shift) | ((w[i + 1u] << (16u - shift)) << 16u);
}

// The f16 at an even byte offset, through unpack2x16float: exact for subnormals too on the
// devices tested (quantized_matmul_takes_subnormal_scales), and no integer-to-float conversion.
fn half_at(off: u32) -> f32 {
    return unpack2x16float(w[off >> 2u] >> ((off & 2u) * 8u)).x;
}
