// Q8_0 spans for gemv_rows: one 34-byte block (f16 d, 32 signed bytes) per span; x = d·q.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<u32>;

// The four int8s of a word, in place after two shifts (small_ints.wgsl): byte k, offset to
// q + 128 by the xor, read as (q + 128)·2ᵇ with b = 0, 0, 0, 8; x is pre-scaled by
// SIGNED_BYTE_PLACES to undo the 2ᵇ, and the offset comes off before the product.
fn signed_bytes_in_place(v: u32) -> vec4<f32> {
    let s = v ^ 0x80808080u;
    let u = s >> 16u;
    return mantissa_values(vec4<u32>(s & 0xffu, (s >> 8u) & 0xffu, u & 0xffu, u & 0xff00u))
        - vec4<f32>(128.0, 128.0, 128.0, 32768.0);
}

const SIGNED_BYTE_PLACES = vec4<f32>(1.0, 1.0, 1.0, 1.0 / 256.0);

fn span_dot(
    task: u32,
    x4: u32,
    row_bytes_at: ptr<function, array<u32, ROWS>>,
    acc: ptr<function, array<f32, ROWS>>,
) {
    let xi = task * 8u;
    var xs: array<vec4<f32>, 8>;
    for (var k = 0u; k < 8u; k++) {
        xs[k] = x_at(x4, xi + k) * SIGNED_BYTE_PLACES;
    }
    for (var r = 0u; r < ROWS; r++) {
        let base = (*row_bytes_at)[r] + task * 34u;
        var total = 0.0;
        for (var k = 0u; k < 8u; k++) {
            total += dot(signed_bytes_in_place(word_at(base + 2u + 4u * k)), xs[k]);
        }
        (*acc)[r] += half_at(base) * total;
    }
}
