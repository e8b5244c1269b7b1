// Activations as 14-bit integers for the integer GEMVs, into `quantized` (declared by the kernel
// as u32 words): each run of 32 values keeps a step d = max|x| / 8191 and quants
// q = round(x / d), stored as the two bytes of q = 128·hi + lo (hi in −64..63, lo in 0..127) so
// that 8-bit dot products (dot4I8Packed) take both halves, and the exact Σx of the run for Q4_K's
// mins. 8-bit activations alone are too coarse: they cost the tiny fixtures 0.015 of logit
// cosine (see src/quant/activations.rs).
// Layout per 64 values (runs a, b) of a row, 36 words (9 vec4<u32> as the GEMVs read them):
// hi(a) ×8, lo(a) ×8, hi(b) ×8, lo(b) ×8, then d_a, Σx_a, d_b, Σx_b; each byte run in element
// order; a row's pairs of runs follow each other, rows too.
//
// Each invocation quantizes four consecutive values, the eight invocations of a run sharing its
// maximum and sum through workgroup memory: a run is done in one step by eight invocations
// rather than by one invocation in 32 (a single invocation per run made the norm and the
// quantization of a decode token latency-bound passes of ~10 µs on the H200).
const QUANT_MAX: f32 = 8191.0;

var<workgroup> run_stats: array<vec2<f32>, WG>;

// Quantizes values 4·quad … 4·quad + 3 (`quad` counted over all rows). Invocation `lid` of the
// workgroup must hold quad ≡ lid (mod 8), so that a run's invocations are lid & ~7 … + 7; all of
// them call this together (it has barriers), those past the end with `in_range` false.
fn quantize_quad(v: vec4<f32>, quad: u32, lid: u32, in_range: bool) {
    let a = abs(v);
    run_stats[lid] = select(
        vec2<f32>(0.0),
        vec2<f32>(max(max(a.x, a.y), max(a.z, a.w)), dot(v, vec4<f32>(1.0))),
        in_range,
    );
    workgroupBarrier();
    let first = lid & ~7u;
    var amax = 0.0;
    var sum = 0.0;
    for (var j = 0u; j < 8u; j++) {
        let stats = run_stats[first + j];
        amax = max(amax, stats.x);
        sum += stats.y;
    }
    // A later call may overwrite `run_stats` only after every run has been read.
    workgroupBarrier();
    if (!in_range) {
        return;
    }
    let d = amax / QUANT_MAX;
    let inverse = select(0.0, 1.0 / d, d > 0.0);
    let q = clamp(vec4<i32>(round(v * inverse)), vec4<i32>(-8191), vec4<i32>(8191));
    let pair = quad / 16u;
    let run = (quad / 8u) % 2u;
    let j = quad % 8u;
    let at = pair * 36u + run * 16u + j;
    quantized[at] = pack4xI8(q >> vec4<u32>(7u));
    quantized[at + 8u] = pack4xI8(q & vec4<i32>(127));
    if (j == 0u) {
        let scales = pair * 36u + 32u + 2u * run;
        quantized[scales] = bitcast<u32>(d);
        quantized[scales + 1u] = bitcast<u32>(sum);
    }
}
