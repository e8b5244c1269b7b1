// The dot products of ROWS weight rows with one input row, for the GEMV entry points, taken by
// one part of the workgroup (the reduction prelude says which invocations form a part). A row
// is cut into `tasks` equal spans of columns; invocation i of a part takes spans i, i+PART, …
// and, for each, loads its x values once and dots them with that span of all ROWS rows (so x
// is read from cache once per ROWS rows). The weight format's file supplies `span_dot` and the
// span length; the reduction prelude supplies `Lane`, the part accessors and `row_totals`; the
// input prelude supplies the input the span reader reads (f32 vec4s through `x_at(row, i)`,
// plain or computed from two tensors; or quantized) and `input_row(t, cols)`, where token t's
// input starts in it.

// Rows first … first+ROWS−1 of a weight of `rows` rows of `row_bytes` bytes against the input
// at x_row; every invocation of the part calls this together, and the sums are valid in all.
fn rows_dot(
    first: u32,
    rows: u32,
    row_bytes: u32,
    x_row: u32,
    tasks: u32,
    lane: Lane,
) -> array<f32, ROWS> {
    // Rows past the end repeat the last row; the caller does not write their sums.
    var row_bytes_at: array<u32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        row_bytes_at[r] = min(first + r, rows - 1u) * row_bytes;
    }
    var acc: array<f32, ROWS>;
    // Two spans per round into separate sums, so that both spans' loads are in flight (Q4_K
    // 1.30 → 1.50 TB/s on the H200).
    var task = part_lane(lane);
    var acc_b: array<f32, ROWS>;
    for (; task + PART < tasks; task += 2u * PART) {
        span_dot(task, x_row, &row_bytes_at, &acc);
        span_dot(task + PART, x_row, &row_bytes_at, &acc_b);
    }
    for (var r = 0u; r < ROWS; r++) {
        acc[r] += acc_b[r];
    }
    for (; task < tasks; task += PART) {
        span_dot(task, x_row, &row_bytes_at, &acc);
    }
    return row_totals(acc, lane);
}
