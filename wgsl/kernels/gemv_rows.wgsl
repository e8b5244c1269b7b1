// y[t, out_offset + r] = Σ_c W[r, c]·x[t, c]: a workgroup takes WG / PART groups of ROWS weight
// rows of one token, each group by one part of its invocations (gemv_rows_dot.wgsl). Several
// parts to a workgroup keep more of them resident on a GPU that caps its workgroups per
// multiprocessor. With `accumulate` the sums are added to y (a residual add fused into the
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
    let group_rows = ROWS * (WG / PART);
    let groups = (p.rows + group_rows - 1u) / group_rows;
    let t = id / groups;
    if (t >= p.tokens) {
        return;
    }
    let first = (id % groups) * group_rows + part_of(lane) * ROWS;
    let totals = rows_dot(first, p.rows, p.row_bytes, input_row(t, p.cols), p.tasks, lane);
    let r = part_lane(lane);
    if (r < ROWS && first + r < p.rows) {
        let i = t * p.out_cols + p.out_offset + first + r;
        y[i] = totals[r] + select(0.0, y[i], p.accumulate != 0u);
    }
}
