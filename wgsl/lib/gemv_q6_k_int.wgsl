// Q6_K spans for gemv_rows against 14-bit integer activations (gemv_input_quantized.wgsl): the
// same spans as gemv_q6_k.wgsl (8 elements of each of the four parts p of half n of a
// super-block), the 6-bit quants shifted to q − 32 in place as signed bytes and dotted with the
// hi and lo bytes of the activation quants by dot4I8Packed, so no weight is converted to float
// and the −32 needs no Σx; one conversion per part remains.
const SPAN: u32 = 32u;

@group(0) @binding(1) var<storage, read> w: array<u32>;

// Four 6-bit quants (low nibbles and bit pairs of the words) as signed bytes q − 32: with the top
// bit of each byte set first, the subtraction borrows nothing across bytes.
fn centred_six_bits(nibbles: u32, high_pairs: u32) -> u32 {
    let q = (nibbles & 0x0f0f0f0fu) | ((high_pairs & 0x03030303u) << 4u);
    return ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
}

// Two words of 4 quants against the matching hi and lo words of the activations.
fn quant_dot(q0: u32, q1: u32, hi: vec2<u32>, lo: vec2<u32>) -> i32 {
    return 128 * (dot4I8Packed(q0, hi.x) + dot4I8Packed(q1, hi.y)) + dot4I8Packed(q0, lo.x)
        + dot4I8Packed(q1, lo.y);
}

fn span_dot(
    task: u32,
    x_row: u32,
    row_bytes_at: ptr<function, array<u32, ROWS>>,
    acc: ptr<function, array<f32, ROWS>>,
) {
    let block = task / 8u;
    let n = (task % 8u) / 4u;
    let l0 = 8u * (task % 4u);
    // Part p is run 4n + p of the super-block: pair 2n + p/2, run p % 2 of the pair.
    var hi: array<vec2<u32>, 4>;
    var lo: array<vec2<u32>, 4>;
    var steps: vec4<f32>;
    for (var part = 0u; part < 4u; part++) {
        let pair = x_row + (block * 4u + 2u * n + part / 2u) * 9u;
        let run = pair + (part % 2u) * 4u + l0 / 16u;
        let h = xq[run];
        let l = xq[run + 2u];
        if (l0 % 16u == 0u) {
            hi[part] = h.xy;
            lo[part] = l.xy;
        } else {
            hi[part] = h.zw;
            lo[part] = l.zw;
        }
        steps[part] = bitcast<vec4<f32>>(xq[pair + 8u])[2u * (part % 2u)];
    }
    for (var r = 0u; r < ROWS; r++) {
        let span = q6_k_span((*row_bytes_at)[r], block, n, l0);
        let first0 = q6_k_word(span.ql);
        let first1 = q6_k_word(span.ql + 4u);
        let second0 = q6_k_word(span.ql + 32u);
        let second1 = q6_k_word(span.ql + 36u);
        let high0 = q6_k_word(span.qh);
        let high1 = q6_k_word(span.qh + 4u);
        let d0 = quant_dot(
            centred_six_bits(first0, high0), centred_six_bits(first1, high1), hi[0], lo[0]);
        let d1 = quant_dot(
            centred_six_bits(second0, high0 >> 2u), centred_six_bits(second1, high1 >> 2u),
            hi[1], lo[1]);
        let d2 = quant_dot(
            centred_six_bits(first0 >> 4u, high0 >> 4u), centred_six_bits(first1 >> 4u, high1 >> 4u),
            hi[2], lo[2]);
        let d3 = quant_dot(
            centred_six_bits(second0 >> 4u, high0 >> 6u), centred_six_bits(second1 >> 4u, high1 >> 6u),
            hi[3], lo[3]);
        let dots = vec4<f32>(signed_to_f32(d0), signed_to_f32(d1), signed_to_f32(d2), signed_to_f32(d3));
        (*acc)[r] += span.d * dot(span.scales * steps, dots);
    }
}
