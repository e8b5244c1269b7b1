// The dot products of ROWS weight rows with one input row, for the GEMV entry points. The
// workgroup's invocations split into ROWS / LANE_ROWS equal parts, one per LANE_ROWS of the rows.
// A row is cut into `tasks` equal spans of columns; invocation i of a part takes spans i, i+L, …
// (L invocations a part) and, for each, loads its x values once and dots them with that span of
// its LANE_ROWS rows (so x is read from cache once per LANE_ROWS rows). The weight format's file
// supplies `span_dot` and the span length; the reduction prelude supplies `Lane`, ROWS and
// `row_totals`; the input prelude supplies the input the span reader reads (f32 vec4s through
// `x_at(row, i)`, plain or computed from two tensors; or quantized) and `input_row(t, cols)`,
// where token t's input starts in it.
const LANE_ROWS: u32 = 2u;

// Rows first … first+ROWS−1 of a weight of `rows` rows of `row_bytes` bytes against the input
// at x_row; every invocation calls this together, and the sums are valid in lid < ROWS.
fn rows_dot(
    first: u32,
    rows: u32,
    row_bytes: u32,
    x_row: u32,
    tasks: u32,
    lane: Lane,
) -> array<f32, ROWS> {
    let lanes = WG / (ROWS / LANE_ROWS);
    let part = lane.lid / lanes;
    // Rows past the end repeat the last row; the caller does not write their sums.
    var row_bytes_at: array<u32, LANE_ROWS>;
    for (var r = 0u; r < LANE_ROWS; r++) {
        row_bytes_at[r] = min(first + part * LANE_ROWS + r, rows - 1u) * row_bytes;
    }
    var acc: array<f32, LANE_ROWS>;
    // Two spans per round into separate sums, so that both spans' loads are in flight (Q4_K
    // 1.30 → 1.50 TB/s on the H200).
    var task = lane.lid % lanes;
    var acc_b: array<f32, LANE_ROWS>;
    for (; task + lanes < tasks; task += 2u * lanes) {
        span_dot(task, x_row, &row_bytes_at, &acc);
        span_dot(task + lanes, x_row, &row_bytes_at, &acc_b);
    }
    for (var r = 0u; r < LANE_ROWS; r++) {
        acc[r] += acc_b[r];
    }
    for (; task < tasks; task += lanes) {
        span_dot(task, x_row, &row_bytes_at, &acc);
    }
    // Each part's sums in its rows' places, zeros elsewhere (constant indices: registers).
    var sums: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        sums[r] = select(0.0, acc[r % LANE_ROWS], r / LANE_ROWS == part);
    }
    return row_totals(sums, lane);
}
