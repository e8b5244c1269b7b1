// y[t, out_offset + r] = Σ_c W[r, c]·x[t, c], ROWS weight rows per workgroup and token
// (gemv_rows_dot.wgsl). With `accumulate` the sums are added to y (a residual add fused into the
// projection).

struct Params {
    rows: u32,
    cols: u32,
    tokens: u32,
    row_bytes: u32,
    out_cols: u32,
    out_offset: u32,
    tasks: u32,
    accumulate: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    lane: Lane,
) {
    let id = workgroup_index(wid, nwg);
    let groups = (p.rows + ROWS - 1u) / ROWS;
    let first = (id % groups) * ROWS;
    let t = id / groups;
    if (t >= p.tokens) {
        return;
    }
    let totals = rows_dot(first, p.rows, p.row_bytes, input_row(t, p.cols), p.tasks, lane);
    if (lane.lid < ROWS && first + lane.lid < p.rows) {
        let i = t * p.out_cols + p.out_offset + first + lane.lid;
        y[i] = totals[lane.lid] + select(0.0, y[i], p.accumulate != 0u);
    }
}
