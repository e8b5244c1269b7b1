// Per-row sums over the workgroup through workgroup memory (no subgroup support needed).
const ROWS: u32 = 2u;

struct Lane {
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> partials: array<f32, ROWS * WG>;

// Every invocation calls this together; the totals are valid in every invocation.
fn row_totals(acc: array<f32, ROWS>, lane: Lane) -> array<f32, ROWS> {
    for (var r = 0u; r < ROWS; r++) {
        partials[r * WG + lane.lid] = acc[r];
    }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lane.lid < stride) {
            for (var r = 0u; r < ROWS; r++) {
                partials[r * WG + lane.lid] += partials[r * WG + lane.lid + stride];
            }
        }
        workgroupBarrier();
    }
    var totals: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        totals[r] = partials[r * WG];
    }
    return totals;
}
