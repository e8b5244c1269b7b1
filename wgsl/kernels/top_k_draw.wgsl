// The second pass of sampling, in one workgroup: the k best of the chunks' candidates (as
// top_k_chunks.wgsl orders them), then on one invocation the choice of sample.rs `choose`:
// with temperature ≤ 0 the first; else softmax of value / temperature over them, cut by top-p
// and min-p, and the candidate where `uniform` times the kept mass falls. The id is written to
// `chosen` and to row `slot` of `recent`; -1 when no logit was finite.

struct Params {
    candidates: u32,
    k: u32,
    slot: u32,
    temperature: f32,
    top_p: f32,
    min_p: f32,
    uniform: f32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> candidate_values: array<f32>;
@group(0) @binding(2) var<storage, read> candidate_indices: array<f32>;
@group(0) @binding(3) var<storage, read_write> chosen: array<f32>;
@group(0) @binding(4) var<storage, read_write> recent: array<f32>;

const MAX_K: u32 = 64u;

var<workgroup> top_values: array<f32, MAX_K>;
var<workgroup> top_indices: array<u32, MAX_K>;

fn candidate_index(c: u32) -> u32 {
    let i = candidate_indices[c];
    return select(u32(i), NO_INDEX, i < 0.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var last_value = 0.0;
    var last_index = NO_INDEX;
    var done = false;
    for (var round = 0u; round < p.k; round++) {
        var best_value = 0.0;
        var best_index = NO_INDEX;
        for (var c = lid; c < p.candidates; c += WG) {
            let v = candidate_values[c];
            let i = candidate_index(c);
            let after_last = last_index == NO_INDEX || before(last_value, last_index, v, i);
            if (!done && after_last && before(v, i, best_value, best_index)) {
                best_value = v;
                best_index = i;
            }
        }
        let best = workgroup_best(best_value, best_index, lid);
        last_value = bitcast<f32>(best.x);
        last_index = best.y;
        if (lid == 0u) {
            top_values[round] = last_value;
            top_indices[round] = last_index;
        }
        done = last_index == NO_INDEX;
    }
    if (lid != 0u) {
        return;
    }
    var count = 0u;
    while (count < p.k && top_indices[count] != NO_INDEX) {
        count++;
    }
    var id = -1.0;
    if (count > 0u && p.temperature <= 0.0) {
        id = f32(top_indices[0]);
    } else if (count > 0u) {
        // Probabilities, in place of the values.
        let largest = top_values[0] / p.temperature;
        var sum = 0.0;
        for (var i = 0u; i < count; i++) {
            let e = exp(top_values[i] / p.temperature - largest);
            top_values[i] = e;
            sum += e;
        }
        for (var i = 0u; i < count; i++) {
            top_values[i] = top_values[i] / sum;
        }
        let least = top_values[0] * p.min_p;
        var cumulative = 0.0;
        var keep = 0u;
        for (var i = 0u; i < count; i++) {
            if (keep > 0u && (top_values[i] < least || cumulative >= p.top_p)) {
                break;
            }
            cumulative += top_values[i];
            keep++;
        }
        var total = 0.0;
        for (var i = 0u; i < keep; i++) {
            total += top_values[i];
        }
        var left = p.uniform * total;
        id = f32(top_indices[keep - 1u]);
        for (var i = 0u; i < keep; i++) {
            if (left < top_values[i]) {
                id = f32(top_indices[i]);
                break;
            }
            left -= top_values[i];
        }
    }
    chosen[0] = id;
    recent[p.slot] = id;
}
