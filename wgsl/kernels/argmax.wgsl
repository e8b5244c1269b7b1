// Argmax per row in two passes of this kernel: the first reduces chunks of CHUNK values of each
// row (`indexed` = 0: a value's index is its column), the second the chunks' (value, index)
// pairs of each row (`indexed` = 1: indices come with the values, as exact f32). One workgroup
// per (row, chunk). The largest value wins, the lowest index on ties; NaN never wins, and a row
// of NaN gives its last index (sample.rs `argmax`). A chunk of NaN passes on index -1.

struct Params {
    cols: u32,
    chunks: u32,
    rows: u32,
    indexed: u32,
    // The row's length in logits (`cols` is the chunks' count in the second pass).
    row_len: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> values: array<f32>;
@group(0) @binding(2) var<storage, read> indices: array<f32>;
@group(0) @binding(3) var<storage, read_write> best_values: array<f32>;
@group(0) @binding(4) var<storage, read_write> best_indices: array<f32>;

const CHUNK: u32 = 4096u;
// No value yet (or only NaN): loses to any value.
const NO_INDEX: u32 = 0xffffffffu;

var<workgroup> slot_values: array<f32, WG>;
var<workgroup> slot_indices: array<u32, WG>;

fn beats(v: f32, i: u32, best_v: f32, best_i: u32) -> bool {
    if (i == NO_INDEX) {
        return false;
    }
    return best_i == NO_INDEX || v > best_v || (v == best_v && i < best_i);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let row = id / p.chunks;
    let chunk = id % p.chunks;
    if (row >= p.rows) {
        return;
    }
    let start = chunk * CHUNK;
    let end = min(start + CHUNK, p.cols);
    var best_v = 0.0;
    var best_i = NO_INDEX;
    for (var c = start + lid; c < end; c += WG) {
        let v = values[row * p.cols + c];
        var i = c;
        if (p.indexed != 0u) {
            let index = indices[row * p.cols + c];
            i = select(u32(index), NO_INDEX, index < 0.0);
        }
        // By its bits: a compiler may assume that `v != v` never holds.
        if ((bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) {
            i = NO_INDEX;
        }
        if (beats(v, i, best_v, best_i)) {
            best_v = v;
            best_i = i;
        }
    }
    slot_values[lid] = best_v;
    slot_indices[lid] = best_i;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            let v = slot_values[lid + stride];
            let i = slot_indices[lid + stride];
            if (beats(v, i, slot_values[lid], slot_indices[lid])) {
                slot_values[lid] = v;
                slot_indices[lid] = i;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        best_values[id] = slot_values[0];
        let best = slot_indices[0];
        if (best != NO_INDEX) {
            best_indices[id] = f32(best);
        } else if (p.chunks == 1u) {
            // The row's last pass: a row of NaN.
            best_indices[id] = f32(p.row_len - 1u);
        } else {
            best_indices[id] = -1.0;
        }
    }
}
