// The parts of a GEMV workgroup are runs of PART invocations, each summing its rows through
// workgroup memory (no subgroup operations needed).
const ROWS: u32 = 2u;

struct Lane {
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> partials: array<f32, ROWS * WG>;

// This invocation's place in its part, and its part.
fn part_lane(lane: Lane) -> u32 {
    return lane.lid % PART;
}

fn part_of(lane: Lane) -> u32 {
    return lane.lid / PART;
}

// Every invocation of the workgroup calls this together; the totals are valid in all of them.
fn row_totals(acc: array<f32, ROWS>, lane: Lane) -> array<f32, ROWS> {
    for (var r = 0u; r < ROWS; r++) {
        partials[r * WG + lane.lid] = acc[r];
    }
    workgroupBarrier();
    for (var stride = PART / 2u; stride > 0u; stride >>= 1u) {
        if (lane.lid % PART < stride) {
            for (var r = 0u; r < ROWS; r++) {
                partials[r * WG + lane.lid] += partials[r * WG + lane.lid + stride];
            }
        }
        workgroupBarrier();
    }
    var totals: array<f32, ROWS>;
    let first = lane.lid - lane.lid % PART;
    for (var r = 0u; r < ROWS; r++) {
        totals[r] = partials[r * WG + first];
    }
    return totals;
}
