// Q4_K spans for gemv_rows: 32 nibble bytes (one 16-byte load) of a 256-element super-block,
// i.e. 16 elements of sub-block 2c (low nibbles) and the same 16 of sub-block 2c+1 (high).
// Super-blocks are 144 = 9·16 bytes: one load of the header (f16 d, f16 dmin, 12 bytes of 6-bit
// scales and mins) and one of the nibbles. The mins are applied once per span through Σx:
// Σ(d·sc·q − dmin·m)·x = d·sc·Σq·x − dmin·m·Σx.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;

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
    for (var r = 0u; r < ROWS; r++) {
        let v = (*row_bytes_at)[r] / 16u + block * 9u;
        let head = w[v];
        let q = w[v + 1u + 2u * c + h];
        let dot_lo = dot(low_nibbles(q.x), xl0) + dot(low_nibbles(q.y), xl1)
            + dot(low_nibbles(q.z), xl2) + dot(low_nibbles(q.w), xl3);
        let dot_hi = dot(high_nibbles(q.x), xh0) + dot(high_nibbles(q.y), xh1)
            + dot(high_nibbles(q.z), xh2) + dot(high_nibbles(q.w), xh3);
        let f = q4_k_span_factors(head, c);
        (*acc)[r] += f.x * dot_lo + f.y * dot_hi - f.z * sum_lo - f.w * sum_hi;
    }
}
