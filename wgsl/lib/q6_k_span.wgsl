// Where the span of half n, bytes l0..l0+8, of a Q6_K super-block lies (see gemv_q6_k.wgsl), for
// both Q6_K span readers: the byte offsets of its nibbles (ql) and bit pairs (qh), the block's d
// and the signed 8-bit scales of its four parts. Super-blocks lie Q6_K_BLOCK_BYTES apart (defined
// by the host): 210 as in the file, or 212 where the host pads them so that every field, and so
// every word the readers take, sits on a whole word.
struct Q6kSpan {
    ql: u32,
    qh: u32,
    d: f32,
    scales: vec4<f32>,
}

fn signed_byte(v: u32, k: u32) -> f32 {
    return signed_to_f32(bitcast<i32>(v << (24u - 8u * k)) >> 24u);
}

// The word at byte `off` of a block field: one load where the blocks are padded to whole words.
fn q6_k_word(off: u32) -> u32 {
    if (Q6_K_BLOCK_BYTES % 4u == 0u) {
        return w[off >> 2u];
    }
    return word_at(off);
}

fn q6_k_span(row_byte: u32, block: u32, n: u32, l0: u32) -> Q6kSpan {
    let base = row_byte + block * Q6_K_BLOCK_BYTES;
    let s0 = q6_k_word(base + 192u + 8u * n);
    let s1 = q6_k_word(base + 196u + 8u * n);
    let k = l0 / 16u;
    return Q6kSpan(
        base + 64u * n + l0,
        base + 128u + 32u * n + l0,
        half_at(base + 208u),
        vec4<f32>(signed_byte(s0, k), signed_byte(s0, k + 2u), signed_byte(s1, k), signed_byte(s1, k + 2u)),
    );
}
