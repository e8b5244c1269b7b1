// The f16 scratch matrix of the cooperative GEMM that the half_weights*.wgsl kernels fill from
// weight rows first_row.. of one part: `padded_rows` rows of `padded_cols` halves, packed two to
// a word; the rows past `rows` and the columns past `cols` are zeros, so that the GEMM reads whole
// tiles without bounds checks. Values beyond the f16 range are clamped to it rather than becoming
// infinities.

const F16_MAX: f32 = 65504.0;

struct Params {
    rows: u32,
    cols: u32,
    row_bytes: u32,
    first_row: u32,
    padded_rows: u32,
    padded_cols: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;

// Eight values, clamped, as four words of halves.
fn clamped_halves(a: vec4<f32>, b: vec4<f32>) -> vec4<u32> {
    let lo = clamp(a, vec4<f32>(-F16_MAX), vec4<f32>(F16_MAX));
    let hi = clamp(b, vec4<f32>(-F16_MAX), vec4<f32>(F16_MAX));
    return vec4<u32>(
        pack2x16float(lo.xy),
        pack2x16float(lo.zw),
        pack2x16float(hi.xy),
        pack2x16float(hi.zw),
    );
}
