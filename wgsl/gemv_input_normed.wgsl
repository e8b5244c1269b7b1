// The GEMV input RMS-normed as it is read: x ⊙ w_norm here, and the 1/rms(x) factor, the same
// for every column, applied to the sums at the end. Σx² comes from the loads the dot products
// make anyway (each x value is read once per workgroup), so the norm costs no pass of its own.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> norm: array<vec4<f32>>;

var<private> squares: f32;

fn x_at(row: u32, i: u32) -> vec4<f32> {
    let v = x[row + i];
    squares += dot(v, v);
    return v * norm[i];
}

// 1 / sqrt(mean(x²) + eps) over the row, in every invocation that writes a sum.
fn input_scale(lane: Lane) -> f32 {
    var each: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        each[r] = squares;
    }
    let total = row_totals(each, lane)[min(lane.lid, ROWS - 1u)];
    return 1.0 / sqrt(total / f32(p.cols) + p.eps);
}
