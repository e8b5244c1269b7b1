// Weight rows decoded into the f16 scratch matrix (half_scratch.wgsl) for the formats without a
// decoder of their own. One invocation per SPAN elements of a row (consecutive invocations take
// consecutive spans of one row, so that their reads of the weight blocks are close together).
// The weight format comes from the dequant_*.wgsl file composed with this one.

const SPAN: u32 = max(UNIT, 2u);

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
