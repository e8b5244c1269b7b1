// The factors of sub-blocks 2c and 2c+1 of a Q4_K super-block, from its 16-byte header (f16 d,
// f16 dmin, 12 bytes of 6-bit scales and mins): (d·sc[2c], d·sc[2c+1], dmin·m[2c], dmin·m[2c+1]).
// The pair sits in bytes 2c and 2c+1 of the scale words: words 1 and 2 of the header for c < 2;
// for c ≥ 2 the low/high halves of word 3 plus the top bits of words 1 and 2.
// Every conversion here avoids the GPU's slow integer-to-float unit (a quarter of the rate of
// integer arithmetic on NVIDIA): the halves through unpack2x16float, the 6-bit values through
// small_to_f32. What depends on c is chosen by selects (c is the same in every span an
// invocation reads), so both cases are one masked merge: on the H200 this decodes faster than
// choosing whole words by c (benches/results/), though only with the four-part GEMV
// workgroups.
fn q4_k_span_factors(head: vec4<u32>, c: u32) -> vec4<f32> {
    let d_dmin = unpack2x16float(head.x);
    let upper = c >= 2u;
    let shift = 16u * (c % 2u);
    // Low bits of the pair: 6 from words 1/2, or 4 from word 3; high bits (c ≥ 2 only): the top
    // two of the bytes of words 1/2, moved to bits 4–5.
    let low_mask = select(0x3f3fu, 0x0f0fu, upper);
    let high_mask = select(0u, 0x3030u, upper);
    let sc_low = select(head.y, head.w, upper) >> shift;
    let m_low = select(head.z, head.w >> 4u, upper) >> shift;
    let sc = (sc_low & low_mask) | ((head.y >> (shift + 2u)) & high_mask);
    let m = (m_low & low_mask) | ((head.z >> (shift + 2u)) & high_mask);
    let scales = small_to_f32(vec2<u32>(sc & 0xffu, sc >> 8u)) * d_dmin.x;
    let mins = small_to_f32(vec2<u32>(m & 0xffu, m >> 8u)) * d_dmin.y;
    return vec4<f32>(scales, mins);
}
