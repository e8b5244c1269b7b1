// Q4_K spans for gemv_rows against 14-bit integer activations (gemv_input_quantized.wgsl): the
// same spans as gemv_q4_k.wgsl (16 values of sub-block 2c from the low nibbles, the same 16 of
// 2c+1 from the high), each nibble word dotted with the hi and lo bytes of the quants by
// dot4I8Packed, so no weight is converted to float; one conversion per sub-block remains.
// Σq·x = d_x·(128·Σq·hi + Σq·lo). The mins take the run's exact Σx, once per sub-block (h = 0).
// The weight comes through `weight(i)` (vec4<u32>s): gemv_weight.wgsl or gemv_several.wgsl.
const SPAN: u32 = 32u;

fn nibble_dot(q: vec4<u32>, hi: vec4<u32>, lo: vec4<u32>) -> i32 {
    let d_hi = dot4I8Packed(q.x, hi.x) + dot4I8Packed(q.y, hi.y) + dot4I8Packed(q.z, hi.z)
        + dot4I8Packed(q.w, hi.w);
    let d_lo = dot4I8Packed(q.x, lo.x) + dot4I8Packed(q.y, lo.y) + dot4I8Packed(q.z, lo.z)
        + dot4I8Packed(q.w, lo.w);
    return 128 * d_hi + d_lo;
}

fn span_dot(
    task: u32,
    x_row: u32,
    row_bytes_at: ptr<function, array<u32, ROWS>>,
    acc: ptr<function, array<f32, ROWS>>,
) {
    let block = task / 8u;
    let c = (task % 8u) / 2u;
    let h = task % 2u;
    let pair = x_row + (block * 4u + c) * 9u;
    let hi_a = xq[pair + h];
    let lo_a = xq[pair + 2u + h];
    let hi_b = xq[pair + 4u + h];
    let lo_b = xq[pair + 6u + h];
    let runs = bitcast<vec4<f32>>(xq[pair + 8u]);
    // Σx of both sub-blocks, counted by the first half-span of each only.
    let sum_lo = select(0.0, runs.y, h == 0u);
    let sum_hi = select(0.0, runs.w, h == 0u);
    for (var r = 0u; r < ROWS; r++) {
        let v = (*row_bytes_at)[r] / 16u + block * 9u;
        let head = weight(v);
        let q = weight(v + 1u + 2u * c + h);
        let dot_lo = runs.x * signed_to_f32(nibble_dot(q & vec4<u32>(0x0f0f0f0fu), hi_a, lo_a));
        let dot_hi = runs.z * signed_to_f32(nibble_dot((q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu), hi_b, lo_b));
        let f = q4_k_span_factors(head, c);
        (*acc)[r] += f.x * dot_lo + f.y * dot_hi - f.z * sum_lo - f.w * sum_hi;
    }
}
