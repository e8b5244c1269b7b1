// 64 values as 14-bit integers for the integer GEMVs, into `quantized` (declared by the kernel):
// each run of 32 values keeps a step d = max|x| / 8191 and quants q = round(x / d), stored as
// the two bytes of q = 128·hi + lo (hi in −64..63, lo in 0..127) so that 8-bit dot products
// (dot4I8Packed) take both halves, and the exact Σx of the run for Q4_K's mins. 8-bit
// activations alone are too coarse: they cost the tiny fixtures 0.015 of logit cosine (see
// src/quant/activations.rs).
// Layout per 64 values (runs a, b) of a row: 9 vec4<u32>:
// hi(a) hi(a) lo(a) lo(a) hi(b) hi(b) lo(b) lo(b) [d_a, Σx_a, d_b, Σx_b], each byte run in
// element order; a row's pairs follow each other, rows too.
const QUANT_MAX: f32 = 8191.0;

// The hi (when `high`) or lo bytes of 32 quants, 4 per word in element order.
fn pack_bytes(q: array<vec4<i32>, 8>, high: bool) -> array<u32, 8> {
    var words: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
        var halves = q[i] & vec4<i32>(127);
        if (high) {
            halves = q[i] >> vec4<u32>(7u);
        }
        words[i] = pack4xI8(halves);
    }
    return words;
}

// Writes the values of pair `pair` (global over the rows).
fn quantize_pair(v: array<vec4<f32>, 16>, pair: u32) {
    let at = pair * 9u;
    var scales: vec4<f32>;
    for (var run = 0u; run < 2u; run++) {
        var amax = 0.0;
        var sum = 0.0;
        for (var i = 0u; i < 8u; i++) {
            let a = abs(v[run * 8u + i]);
            amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
            sum += dot(v[run * 8u + i], vec4<f32>(1.0));
        }
        let d = amax / QUANT_MAX;
        let inverse = select(0.0, 1.0 / d, d > 0.0);
        var q: array<vec4<i32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            let scaled = round(v[run * 8u + i] * inverse);
            q[i] = clamp(vec4<i32>(scaled), vec4<i32>(-8191), vec4<i32>(8191));
        }
        let hi = pack_bytes(q, true);
        let lo = pack_bytes(q, false);
        let run_at = at + run * 4u;
        quantized[run_at] = vec4<u32>(hi[0], hi[1], hi[2], hi[3]);
        quantized[run_at + 1u] = vec4<u32>(hi[4], hi[5], hi[6], hi[7]);
        quantized[run_at + 2u] = vec4<u32>(lo[0], lo[1], lo[2], lo[3]);
        quantized[run_at + 3u] = vec4<u32>(lo[4], lo[5], lo[6], lo[7]);
        scales[2u * run] = d;
        scales[2u * run + 1u] = sum;
    }
    quantized[at + 8u] = bitcast<vec4<u32>>(scales);
}
