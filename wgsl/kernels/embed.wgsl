// out[t] = dequantized row ids[t] of the weight, for the tokens whose row lies in this part
// (rows first_row..first_row+part_rows); one workgroup per token. The weight format comes from
// the dequant_*.wgsl file composed with this one. With `float_ids` the ids are exact f32 values
// (an argmax on the GPU made them) rather than u32.

struct Params {
    cols: u32,
    row_bytes: u32,
    tokens: u32,
    first_row: u32,
    part_rows: u32,
    units: u32,
    float_ids: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = workgroup_index(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    var id = ids[t];
    if (p.float_ids != 0u) {
        id = u32(bitcast<f32>(id));
    }
    if (id < p.first_row || id - p.first_row >= p.part_rows) {
        return;
    }
    let row_base = (id - p.first_row) * p.row_bytes;
    for (var u = lid; u < p.units; u += WG) {
        let v = unit_values(row_base, u);
        let o = t * p.cols + u * UNIT;
        for (var l = 0u; l < UNIT; l++) {
            out[o + l] = v[l];
        }
    }
}
