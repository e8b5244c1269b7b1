// Weight rows first_row.. of one part, decoded into an f16 scratch matrix for the cooperative
// GEMM: `padded_rows` rows of `padded_cols` halves, packed two to a word; the rows past `rows` and
// the columns past `cols` are zeros, so that the GEMM reads whole tiles without bounds checks.
// Values beyond the f16 range are clamped to it rather than becoming infinities.
// One invocation per SPAN elements of a row (consecutive invocations take consecutive spans of
// one row, so that their reads of the weight blocks are close together). The weight format comes
// from the dequant_*.wgsl file composed with this one.

const SPAN: u32 = max(UNIT, 2u);
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
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> halves: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let spans = p.padded_cols / SPAN;
    let i = element_index(wid, nwg, lid);
    if (i >= p.padded_rows * spans) {
        return;
    }
    let row = i / spans;
    let first_col = (i % spans) * SPAN;
    var values: array<f32, SPAN>;
    for (var u = 0u; u < SPAN / UNIT; u++) {
        let col = first_col + u * UNIT;
        if (row < p.rows && col < p.cols) {
            let v = unit_values((p.first_row + row) * p.row_bytes, col / UNIT);
            for (var l = 0u; l < UNIT; l++) {
                values[u * UNIT + l] = clamp(v[l], -F16_MAX, F16_MAX);
            }
        }
    }
    let out = (row * p.padded_cols + first_col) / 2u;
    for (var j = 0u; j < SPAN / 2u; j++) {
        halves[out + j] = pack2x16float(vec2<f32>(values[2u * j], values[2u * j + 1u]));
    }
}
