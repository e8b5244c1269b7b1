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
        let best = workgroup_best(best_value, best_index, lid);
        last_value = bitcast<f32>(best.x);
        last_index = best.y;
        if (lid == 0u) {
            candidate_values[group * p.k + round] = last_value;
            candidate_indices[group * p.k + round] =
                select(f32(last_index), -1.0, last_index == NO_INDEX);
        }
        done = last_index == NO_INDEX;
    }
}
