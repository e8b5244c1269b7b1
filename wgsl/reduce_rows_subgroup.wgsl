// Per-row sums over the workgroup: subgroupAdd within each subgroup (of whatever size the device
// has), then the subgroups' sums through workgroup memory.
const ROWS: u32 = 2u;

struct Lane {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(num_subgroups) sg_count: u32,
}

var<workgroup> partials: array<f32, ROWS * WG>;

// Every invocation calls this together; the totals are valid in invocations lid < ROWS.
fn row_totals(acc: array<f32, ROWS>, lane: Lane) -> array<f32, ROWS> {
    for (var r = 0u; r < ROWS; r++) {
        let s = subgroupAdd(acc[r]);
        if (lane.sg_lane == 0u) {
            partials[r * WG + lane.sg_id] = s;
        }
    }
    workgroupBarrier();
    var totals: array<f32, ROWS>;
    if (lane.lid < ROWS) {
        for (var k = 0u; k < lane.sg_count; k++) {
            totals[lane.lid] += partials[lane.lid * WG + k];
        }
    }
    return totals;
}
