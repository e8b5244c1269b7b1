// The rounds of sampling's top k (top_k_chunks.wgsl, top_k_draw.wgsl): candidates in order of
// the larger value, then the lower index; each round picks the workgroup's best candidate after
// the previous round's pick.

const NO_INDEX: u32 = 0xffffffffu;

var<workgroup> slot_values: array<f32, WG>;
var<workgroup> slot_indices: array<u32, WG>;

// Whether (v, i) comes before (w, j); NO_INDEX (no candidate) is last.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    if (i == NO_INDEX) {
        return false;
    }
    return j == NO_INDEX || v > w || (v == w && i < j);
}

// Every invocation's best candidate of the round in, the workgroup's out (to every invocation).
fn workgroup_best(value: f32, index: u32, lid: u32) -> vec2<u32> {
    slot_values[lid] = value;
    slot_indices[lid] = index;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            let v = slot_values[lid + stride];
            let i = slot_indices[lid + stride];
            if (before(v, i, slot_values[lid], slot_indices[lid])) {
                slot_values[lid] = v;
                slot_indices[lid] = i;
            }
        }
        workgroupBarrier();
    }
    let best = vec2<u32>(bitcast<u32>(slot_values[0]), slot_indices[0]);
    // Every invocation has read the winner before the slots are written again.
    workgroupBarrier();
    return best;
}
