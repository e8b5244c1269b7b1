// Q8_0 spans for gemv_rows: one 34-byte block (f16 d, 32 signed bytes) per span; x = d·q.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<u32>;

// The four int8s of a word as f32 without integer→float conversions (measured on the H200: this
// GEMV 0.94 → 1.55 TB/s; the same trick left Q4_K flat and slowed Q6_K, so only Q8_0 has it).
// The xor offsets each byte to q + 128; a field m < 2²³ or-ed into the bits of the float 2²³ is
// 2²³ + m, and subtracting 2²³ is exact. Two shifts leave byte k at bit b = 0, 0, 0, 8, so it
// reads as (q + 128)·2ᵇ: x is pre-scaled by SIGNED_BYTE_PLACES to undo the 2ᵇ (exact), and the
// offset comes off before the product.
fn signed_bytes_in_place(v: u32) -> vec4<f32> {
    let s = v ^ 0x80808080u;
    let u = s >> 16u;
    let fields = vec4<u32>(s & 0xffu, (s >> 8u) & 0xffu, u & 0xffu, u & 0xff00u);
    return bitcast<vec4<f32>>(fields | vec4<u32>(0x4b000000u))
        - vec4<f32>(8388608.0 + 128.0, 8388608.0 + 128.0, 8388608.0 + 128.0, 8388608.0 + 32768.0);
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
