// y[t, out_offset + r] = Σ_c W[r, c]·x[t, c], ROWS weight rows per workgroup and token. A row is
// cut into `tasks` equal spans of columns; invocation i takes spans i, i+WG, … and, for each,
// loads its x values once and dots them with that span of all ROWS rows (so x is read from cache
// once per ROWS rows). The weight format's file supplies `w`, `span_dot` and the span length;
// the reduction prelude supplies `Lane` and `row_totals`; the input prelude supplies the input
// the span reader reads (f32 vec4s through `x_at(row, i)`, plain or computed from two tensors;
// or quantized) and `input_row(t, cols)`, where token t's input starts in it. With `accumulate`
// the sums are added to y (a residual add fused into the projection).

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
    // Rows past the end repeat the last row; their sums are not written.
    var row_bytes_at: array<u32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        row_bytes_at[r] = min(first + r, p.rows - 1u) * p.row_bytes;
    }
    var acc: array<f32, ROWS>;
    let x_row = input_row(t, p.cols);
    // Two spans per round into separate sums, so that both spans' loads are in flight (Q4_K
    // 1.30 → 1.50 TB/s on the H200).
    var task = lane.lid;
    var acc_b: array<f32, ROWS>;
    for (; task + WG < p.tasks; task += 2u * WG) {
        span_dot(task, x_row, &row_bytes_at, &acc);
        span_dot(task + WG, x_row, &row_bytes_at, &acc_b);
    }
    for (var r = 0u; r < ROWS; r++) {
        acc[r] += acc_b[r];
    }
    for (; task < p.tasks; task += WG) {
        span_dot(task, x_row, &row_bytes_at, &acc);
    }
    let totals = row_totals(acc, lane);
    if (lane.lid < ROWS && first + lane.lid < p.rows) {
        let i = t * p.out_cols + p.out_offset + first + lane.lid;
        y[i] = totals[lane.lid] + select(0.0, y[i], p.accumulate != 0u);
    }
}
