// Q4_K spans for gemv_rows: 32 nibble bytes (one 16-byte load) of a 256-element super-block,
// i.e. 16 elements of sub-block 2c (low nibbles) and the same 16 of sub-block 2c+1 (high).
// Super-blocks are 144 = 9·16 bytes: one load of the header (f16 d, f16 dmin, 12 bytes of 6-bit
// scales and mins) and one of the nibbles. The mins are applied once per span through Σx:
// Σ(d·sc·q − dmin·m)·x = d·sc·Σq·x − dmin·m·Σx.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;

fn low_nibbles(v: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(v & 0x0f0f0f0fu));
}

fn high_nibbles(v: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((v >> 4u) & 0x0f0f0f0fu));
}

fn span_dot(
    task: u32,
    x4: u32,
    row_bytes_at: ptr<function, array<u32, ROWS>>,
    acc: ptr<function, array<f32, ROWS>>,
) {
    let block = task / 8u;
    let c = (task % 8u) / 2u;
    let h = task % 2u;
    let xi = block * 64u + c * 16u + h * 4u;
    let xl0 = x_at(x4, xi);
    let xl1 = x_at(x4, xi + 1u);
    let xl2 = x_at(x4, xi + 2u);
    let xl3 = x_at(x4, xi + 3u);
    let xh0 = x_at(x4, xi + 8u);
    let xh1 = x_at(x4, xi + 9u);
    let xh2 = x_at(x4, xi + 10u);
    let xh3 = x_at(x4, xi + 11u);
    let ones = vec4<f32>(1.0);
    let sum_lo = dot(xl0 + xl1 + xl2 + xl3, ones);
    let sum_hi = dot(xh0 + xh1 + xh2 + xh3, ones);
    // Sub-blocks 2c and 2c+1 sit in bytes 2c and 2c+1 of the scale words: words 1 and 2 of the
    // header for c < 2; for c ≥ 2 low/high halves of word 3 plus the top bits of words 1 and 2.
    let shift = 16u * (c % 2u);
    for (var r = 0u; r < ROWS; r++) {
        let v = (*row_bytes_at)[r] / 16u + block * 9u;
        let head = w[v];
        let q = w[v + 1u + 2u * c + h];
        let d = half_to_f32(head.x & 0xffffu);
        let dmin = half_to_f32(head.x >> 16u);
        var sc_word = head.y & 0x3f3f3f3fu;
        var m_word = head.z & 0x3f3f3f3fu;
        if (c >= 2u) {
            sc_word = (head.w & 0x0f0f0f0fu) | (((head.y >> 6u) & 0x03030303u) << 4u);
            m_word = ((head.w >> 4u) & 0x0f0f0f0fu) | (((head.z >> 6u) & 0x03030303u) << 4u);
        }
        let sc_lo = f32((sc_word >> shift) & 0xffu);
        let sc_hi = f32((sc_word >> (shift + 8u)) & 0xffu);
        let m_lo = f32((m_word >> shift) & 0xffu);
        let m_hi = f32((m_word >> (shift + 8u)) & 0xffu);
        let dot_lo = dot(low_nibbles(q.x), xl0) + dot(low_nibbles(q.y), xl1)
            + dot(low_nibbles(q.z), xl2) + dot(low_nibbles(q.w), xl3);
        let dot_hi = dot(high_nibbles(q.x), xh0) + dot(high_nibbles(q.y), xh1)
            + dot(high_nibbles(q.z), xh2) + dot(high_nibbles(q.w), xh3);
        (*acc)[r] += d * (sc_lo * dot_lo + sc_hi * dot_hi) - dmin * (m_lo * sum_lo + m_hi * sum_hi);
    }
}
