// y[t, out_offset + r] = Σ_c W[r, c]·x[t, c] for the rows of one weight part: one workgroup per
// (row, token), each invocation dotting every WG-th unit of the row, then a workgroup sum.
// The weight format comes from the dequant_*.wgsl file composed with this one (UNIT elements
// per `unit_values` call).

struct Params {
    rows: u32,
    cols: u32,
    tokens: u32,
    row_bytes: u32,
    out_cols: u32,
    out_offset: u32,
    units: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let row = id % p.rows;
    let t = id / p.rows;
    if (t >= p.tokens) {
        return;
    }
    let row_base = row * p.row_bytes;
    let x_base = t * p.cols;
    var acc = 0.0;
    for (var u = lid; u < p.units; u += WG) {
        let v = unit_values(row_base, u);
        let xu = x_base + u * UNIT;
        for (var l = 0u; l < UNIT; l++) {
            acc += v[l] * x[xu + l];
        }
    }
    let total = workgroup_sum(acc, lid);
    if (lid == 0u) {
        y[t * p.out_cols + p.out_offset + row] = total;
    }
}
