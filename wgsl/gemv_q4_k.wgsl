// Q4_K spans for gemv_rows: 32 nibble bytes (one 16-byte load) of a 256-element super-block,
// i.e. 16 elements of sub-block 2c (low nibbles) and the same 16 of sub-block 2c+1 (high).
// Super-blocks are 144 = 9·16 bytes: one load of the header (f16 d, f16 dmin, 12 bytes of 6-bit
// scales and mins) and one of the nibbles. The mins are applied once per span through Σx:
// Σ(d·sc·q − dmin·m)·x = d·sc·Σq·x − dmin·m·Σx.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;

// The four low nibbles of v in place (after two shifts shared with the high nibbles), each read
// as q·2ᵇ: byte k's at b = 0, 0, 0, 8; LOW_PLACES undoes that. The high nibbles likewise, at
// b = 4, 4, 4, 12. (A field must stay below bit 23, the float's exponent.)
fn low_nibbles_in_place(v: u32) -> vec4<f32> {
    let t = v >> 8u;
    let u = v >> 16u;
    return mantissa_values(vec4<u32>(v & 0xfu, t & 0xfu, u & 0xfu, u & 0xf00u));
}

fn high_nibbles_in_place(v: u32) -> vec4<f32> {
    let t = v >> 8u;
    let u = v >> 16u;
    return mantissa_values(vec4<u32>(v & 0xf0u, t & 0xf0u, u & 0xf0u, u & 0xf000u));
}

const LOW_PLACES = vec4<f32>(1.0, 1.0, 1.0, 1.0 / 256.0);
const HIGH_PLACES = vec4<f32>(1.0 / 16.0, 1.0 / 16.0, 1.0 / 16.0, 1.0 / 4096.0);

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
        let sc_m = mantissa_values(vec4<u32>(sc_word >> shift, sc_word >> (shift + 8u),
            m_word >> shift, m_word >> (shift + 8u)) & vec4<u32>(0xffu));
        // Products of the in-place nibbles with x, summed per byte place, then put in place.
        let lo = low_nibbles_in_place(q.x) * xl0 + low_nibbles_in_place(q.y) * xl1
            + low_nibbles_in_place(q.z) * xl2 + low_nibbles_in_place(q.w) * xl3;
        let hi = high_nibbles_in_place(q.x) * xh0 + high_nibbles_in_place(q.y) * xh1
            + high_nibbles_in_place(q.z) * xh2 + high_nibbles_in_place(q.w) * xh3;
        let dot_lo = dot(lo, LOW_PLACES);
        let dot_hi = dot(hi, HIGH_PLACES);
        (*acc)[r] += d * (sc_m.x * dot_lo + sc_m.y * dot_hi) - dmin * (sc_m.z * sum_lo + sc_m.w * sum_hi);
    }
}
