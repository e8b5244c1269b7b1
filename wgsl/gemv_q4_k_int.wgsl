// Q4_K spans for gemv_rows against 14-bit integer activations (gemv_input_quantized.wgsl): the
// same spans as gemv_q4_k.wgsl (16 values of sub-block 2c from the low nibbles, the same 16 of
// 2c+1 from the high), each nibble word dotted with the hi and lo bytes of the quants by
// dot4I8Packed, so no weight is converted to float; one conversion per sub-block remains.
// Σq·x = d_x·(128·Σq·hi + Σq·lo). The mins take the run's exact Σx, once per sub-block (h = 0).
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;

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
        let dot_lo = runs.x * f32(nibble_dot(q & vec4<u32>(0x0f0f0f0fu), hi_a, lo_a));
        let dot_hi = runs.z * f32(nibble_dot((q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu), hi_b, lo_b));
        (*acc)[r] += d * (sc_lo * dot_lo + sc_hi * dot_hi) - dmin * (m_lo * sum_lo + m_hi * sum_hi);
    }
}
