// Q8_0 spans for gemv_rows: one 34-byte block (f16 d, 32 signed bytes) per span; x = d·q.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<u32>;

fn span_dot(
    task: u32,
    x4: u32,
    row_bytes_at: ptr<function, array<u32, ROWS>>,
    acc: ptr<function, array<f32, ROWS>>,
) {
    let xi = x4 + task * 8u;
    var xs: array<vec4<f32>, 8>;
    for (var k = 0u; k < 8u; k++) {
        xs[k] = x_at(xi + k);
    }
    for (var r = 0u; r < ROWS; r++) {
        let base = (*row_bytes_at)[r] + task * 34u;
        var total = 0.0;
        for (var k = 0u; k < 8u; k++) {
            total += dot(vec4<f32>(unpack4xI8(word_at(base + 2u + 4u * k))), xs[k]);
        }
        (*acc)[r] += half_at(base) * total;
    }
}
