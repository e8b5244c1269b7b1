// The factors of sub-blocks 2c and 2c+1 of a Q4_K super-block, from its 16-byte header (f16 d,
// f16 dmin, 12 bytes of 6-bit scales and mins): (d·sc[2c], d·sc[2c+1], dmin·m[2c], dmin·m[2c+1]).
// The pair sits in bytes 2c and 2c+1 of the scale words: words 1 and 2 of the header for c < 2;
// for c ≥ 2 the low/high halves of word 3 plus the top bits of words 1 and 2.
// Every conversion here avoids the GPU's slow integer-to-float unit (a quarter of the rate of
// integer arithmetic on NVIDIA): the halves through unpack2x16float, the 6-bit values through
// small_to_f32.
fn q4_k_span_factors(head: vec4<u32>, c: u32) -> vec4<f32> {
    let d_dmin = unpack2x16float(head.x);
    var sc_word = head.y & 0x3f3f3f3fu;
    var m_word = head.z & 0x3f3f3f3fu;
    if (c >= 2u) {
        sc_word = (head.w & 0x0f0f0f0fu) | (((head.y >> 6u) & 0x03030303u) << 4u);
        m_word = ((head.w >> 4u) & 0x0f0f0f0fu) | (((head.z >> 6u) & 0x03030303u) << 4u);
    }
    let shift = 16u * (c % 2u);
    let sc = small_to_f32(vec2<u32>(sc_word >> shift, sc_word >> (shift + 8u)) & vec2<u32>(0xffu));
    let m = small_to_f32(vec2<u32>(m_word >> shift, m_word >> (shift + 8u)) & vec2<u32>(0xffu));
    return vec4<f32>(d_dmin.x * sc, d_dmin.y * m);
}
