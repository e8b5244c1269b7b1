// The parts of a GEMV workgroup are its subgroups (the host picks this file only where they
// have one fixed size, and makes it PART): each part takes rows of its own, so a row's sum is
// one subgroupAdd and no barrier is needed.
const ROWS: u32 = 2u;

struct Lane {
    @builtin(subgroup_invocation_id) index: u32,
    @builtin(subgroup_id) part: u32,
}

// This invocation's place in its part, and its part.
fn part_lane(lane: Lane) -> u32 {
    return lane.index;
}

fn part_of(lane: Lane) -> u32 {
    return lane.part;
}

// Every invocation of the part calls this together; the totals are valid in all of them.
fn row_totals(acc: array<f32, ROWS>, lane: Lane) -> array<f32, ROWS> {
    var totals: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        totals[r] = subgroupAdd(acc[r]);
    }
    return totals;
}
