// The first pass of sampling: each workgroup's k best logits of its chunk of CHUNK, in order
// (the larger first, the lower index on ties), as (value, exact f32 index) pairs; -1 marks the
// slots past the chunk's finite logits. Non-finite logits are never candidates (sample.rs
// `choose`). Each round picks the best logit after the previous round's pick.

struct Params {
    cols: u32,
    k: u32,
    groups: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> candidate_values: array<f32>;
@group(0) @binding(3) var<storage, read_write> candidate_indices: array<f32>;

const PER: u32 = 16u;
const NO_INDEX: u32 = 0xffffffffu;

var<workgroup> slot_values: array<f32, WG>;
var<workgroup> slot_indices: array<u32, WG>;

// Whether (v, i) comes before (w, j): the larger value, then the lower index; NO_INDEX last.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    if (i == NO_INDEX) {
        return false;
    }
    return j == NO_INDEX || v > w || (v == w && i < j);
}

// By its bits: a compiler may assume that every value is a number.
fn finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) < 0x7f800000u;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let group = workgroup_index(wid, nwg);
    if (group >= p.groups) {
        return;
    }
    var values: array<f32, PER>;
    var indices: array<u32, PER>;
    for (var j = 0u; j < PER; j++) {
        let c = group * WG * PER + j * WG + lid;
        indices[j] = NO_INDEX;
        if (c < p.cols) {
            let v = logits[c];
            if (finite(v)) {
                values[j] = v;
                indices[j] = c;
            }
        }
    }
    var last_value = 0.0;
    var last_index = NO_INDEX;
    // Once a round finds nothing, so do the later ones.
    var done = false;
    for (var round = 0u; round < p.k; round++) {
        var best_value = 0.0;
        var best_index = NO_INDEX;
        for (var j = 0u; j < PER; j++) {
            let after_last = last_index == NO_INDEX
                || before(last_value, last_index, values[j], indices[j]);
            if (!done && after_last && before(values[j], indices[j], best_value, best_index)) {
                best_value = values[j];
                best_index = indices[j];
            }
        }
        slot_values[lid] = best_value;
        slot_indices[lid] = best_index;
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
        last_value = slot_values[0];
        last_index = slot_indices[0];
        if (lid == 0u) {
            candidate_values[group * p.k + round] = last_value;
            candidate_indices[group * p.k + round] =
                select(f32(last_index), -1.0, last_index == NO_INDEX);
        }
        // Every invocation has read the winner before the slots are written again.
        workgroupBarrier();
        done = last_index == NO_INDEX;
    }
}
