// The parts of a GEMV workgroup are its subgroups or halves of them (the host picks this file
// only where subgroups have one fixed size, and makes PART that size or half of it): each part
// takes rows of its own, so a row's sum stays inside one subgroup and no barrier is needed.
const ROWS: u32 = 2u;

struct Lane {
    @builtin(subgroup_invocation_id) index: u32,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(subgroup_size) size: u32,
}

// This invocation's place in its part, and its part.
fn part_lane(lane: Lane) -> u32 {
    return lane.index % PART;
}

fn part_of(lane: Lane) -> u32 {
    return lane.subgroup * (lane.size / PART) + lane.index / PART;
}

// Every invocation of the part calls this together; the totals are valid in all of them.
fn row_totals(acc: array<f32, ROWS>, lane: Lane) -> array<f32, ROWS> {
    var totals: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        if (PART == lane.size) {
            totals[r] = subgroupAdd(acc[r]);
        } else {
            var total = acc[r];
            for (var offset = PART / 2u; offset > 0u; offset >>= 1u) {
                total += subgroupShuffleXor(total, offset);
            }
            totals[r] = total;
        }
    }
    return totals;
}
