// Eight decoded Q4_K or Q6_K values as four words of halves, from two words of packed quants
// shifted so that the values' bits are the low ones of each byte: the one decoding of both
// formats' f16 scratch decoders (half_weights_q4_k/q6_k.wgsl) and the cooperative GEMM's tile
// decoders (gemm_coop_weights_q4_k/q6_k.wgsl), so that the two paths agree bit for bit.

// scale·q − min of eight nibbles (q4_k_span_factors.wgsl gives scale and min).
fn q4_k_eight_halves(scale: f32, min: f32, nibbles0: u32, nibbles1: u32) -> vec4<u32> {
    return clamped_halves(scale * low_nibbles(nibbles0) - min, scale * low_nibbles(nibbles1) - min);
}

// (d·scale)·(q − 32) of eight nibbles with two more bits on top (`factor` is d·scale).
fn q6_k_eight_halves(factor: f32, nibbles0: u32, nibbles1: u32, pairs0: u32, pairs1: u32) -> vec4<u32> {
    return clamped_halves(
        factor * (six_bits(nibbles0, pairs0) - 32.0),
        factor * (six_bits(nibbles1, pairs1) - 32.0),
    );
}
