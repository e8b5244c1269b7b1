// Whole words at any even byte offset of a weight buffer bound as `w: array<u32>` (Q6_K and
// Q8_0 blocks are 210 and 34 bytes, so every other block starts half-way through a word).

fn word_at(off: u32) -> u32 {
    let i = off >> 2u;
    return joined_word(w[i], w[i + 1u], off);
}

// The four words from an even byte offset on, in five loads rather than eight.
fn four_words_at(off: u32) -> vec4<u32> {
    let i = off >> 2u;
    let next = w[i + 1u];
    let third = w[i + 2u];
    let fourth = w[i + 3u];
    return vec4<u32>(
        joined_word(w[i], next, off),
        joined_word(next, third, off),
        joined_word(third, fourth, off),
        joined_word(fourth, w[i + 4u], off),
    );
}

// The word at an even byte offset `off` from the two aligned words it spans.
fn joined_word(low: u32, high: u32, off: u32) -> u32 {
    // Without a branch: neighbouring invocations read blocks of both alignments.
    let shift = (off & 2u) * 8u;
    return (low >> shift) | ((high << (16u - shift)) << 16u);
}

// The f16 at an even byte offset, through unpack2x16float: exact for subnormals too on the
// devices tested (quantized_matmul_takes_subnormal_scales), and no integer-to-float conversion.
fn half_at(off: u32) -> f32 {
    return unpack2x16float(w[off >> 2u] >> ((off & 2u) * 8u)).x;
}
