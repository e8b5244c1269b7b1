// Causal depthwise conv1d then SiLU, one invocation per channel over all rows. The history is the
// taps−1 carried rows in `state` followed by x; afterwards `state` keeps the last taps−1 rows of
// it (shifted in ascending order, so every carried value is read before it is overwritten).

struct Params {
    channels: u32,
    taps: u32,
    rows: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> state: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

fn history(r: u32, c: u32) -> f32 {
    let carried = p.taps - 1u;
    if (r < carried) {
        return state[r * p.channels + c];
    }
    return x[(r - carried) * p.channels + c];
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let c = element_index(wid, nwg, lid);
    if (c >= p.channels) {
        return;
    }
    for (var t = 0u; t < p.rows; t++) {
        var sum = 0.0;
        for (var k = 0u; k < p.taps; k++) {
            sum += w[c * p.taps + k] * history(t + k, c);
        }
        out[t * p.channels + c] = sum / (1.0 + exp(-sum));
    }
    for (var i = 0u; i + 1u < p.taps; i++) {
        state[i * p.channels + c] = history(p.rows + i, c);
    }
}
