// Q6_K spans for gemv_rows: in half n of a super-block (q6_k_span.wgsl), bytes l0..l0+8 of the two
// 32-byte nibble runs ql[64n..] and ql[64n+32..] and of the bit pairs qh[32n..] give elements
// 128n + 32p + l0.. (8 each) of the four parts p: low nibbles of the first run (p 0), of the
// second (p 1), high nibbles of the first (p 2) and of the second (p 3), with bits 2p..2p+2 of qh
// on top; x = d·scale[8n + 2p + l0/16]·(q − 32). The −32 is applied once per part through Σx.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<u32>;

fn span_dot(
    task: u32,
    x4: u32,
    row_bytes_at: ptr<function, array<u32, ROWS>>,
    acc: ptr<function, array<f32, ROWS>>,
) {
    let block = task / 8u;
    let n = (task % 8u) / 4u;
    let l0 = 8u * (task % 4u);
    let xi = block * 64u + n * 32u + l0 / 4u;
    var xa: array<vec4<f32>, 4>;
    var xb: array<vec4<f32>, 4>;
    var sums: array<f32, 4>;
    for (var part = 0u; part < 4u; part++) {
        xa[part] = x_at(x4, xi + 8u * part);
        xb[part] = x_at(x4, xi + 8u * part + 1u);
        sums[part] = dot(xa[part] + xb[part], vec4<f32>(1.0));
    }
    for (var r = 0u; r < ROWS; r++) {
        let span = q6_k_span((*row_bytes_at)[r], block, n, l0);
        var dots = vec4<f32>(0.0);
        for (var half = 0u; half < 2u; half++) {
            let first = q6_k_word(span.ql + 4u * half);
            let second = q6_k_word(span.ql + 32u + 4u * half);
            let high = q6_k_word(span.qh + 4u * half);
            var xs: array<vec4<f32>, 4>;
            if (half == 0u) {
                xs = xa;
            } else {
                xs = xb;
            }
            dots += vec4<f32>(
                dot(six_bits(first, high), xs[0]),
                dot(six_bits(second, high >> 2u), xs[1]),
                dot(six_bits(first >> 4u, high >> 4u), xs[2]),
                dot(six_bits(second >> 4u, high >> 6u), xs[3]),
            );
        }
        let offsets = vec4<f32>(sums[0], sums[1], sums[2], sums[3]);
        (*acc)[r] += span.d * dot(span.scales, dots - 32.0 * offsets);
    }
}
