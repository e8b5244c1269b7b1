// Gated DeltaNet §5.2–5.3 in one pass: the causal depthwise conv + SiLU over the rows of m (the
// carried taps−1 raw rows in `state` first), split into q | k | v, and each q and k head
// L2-normalised (q also scaled). One workgroup per head: q heads, k heads, then v heads (not
// normalised), and per block of `rows_per_group` rows, so that a long prompt fills the GPU;
// invocation i owns channels i, i+WG, … of its head. Only the first block reads the carried rows
// (blocks are at least taps − 1 rows long), so it alone shifts `state` once it has read them (the
// shift is as in conv1d_silu.wgsl): no other workgroup touches `state`.

struct Params {
    n_k_head: u32,
    k_dim: u32,
    n_v_head: u32,
    v_dim: u32,
    taps: u32,
    rows: u32,
    q_scale: f32,
    eps: f32,
    rows_per_group: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> m: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> state: array<f32>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> v_out: array<f32>;

// Channels per invocation: heads up to PER_INVOCATION · WG wide.
const PER_INVOCATION: u32 = 4u;

fn channels() -> u32 {
    return 2u * p.n_k_head * p.k_dim + p.n_v_head * p.v_dim;
}

fn history(r: u32, c: u32) -> f32 {
    let carried = p.taps - 1u;
    if (r < carried) {
        return state[r * channels() + c];
    }
    return m[(r - carried) * channels() + c];
}

// SiLU of the conv at row t of channel c.
fn conv_at(t: u32, c: u32) -> f32 {
    var sum = 0.0;
    for (var k = 0u; k < p.taps; k++) {
        sum += w[c * p.taps + k] * history(t + k, c);
    }
    return sum / (1.0 + exp(-sum));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let key_heads = 2u * p.n_k_head;
    let heads = key_heads + p.n_v_head;
    let id = workgroup_index(wid, nwg);
    let head = id % heads;
    let first_row = id / heads * p.rows_per_group;
    if (first_row >= p.rows) {
        return;
    }
    let is_key = head < key_heads;
    let width = select(p.v_dim, p.k_dim, is_key);
    let first = select(key_heads * p.k_dim + (head - key_heads) * p.v_dim, head * p.k_dim, is_key);
    let scale = select(1.0, p.q_scale, head < p.n_k_head);
    for (var t = first_row; t < min(first_row + p.rows_per_group, p.rows); t++) {
        var y: array<f32, PER_INVOCATION>;
        var squares = 0.0;
        for (var s = 0u; s < PER_INVOCATION; s++) {
            let c = lid + s * WG;
            if (c < width) {
                y[s] = conv_at(t, first + c);
                squares += y[s] * y[s];
            }
        }
        var factor = 1.0;
        if (is_key) {
            factor = scale / sqrt(workgroup_sum(squares, lid) + p.eps);
        }
        for (var s = 0u; s < PER_INVOCATION; s++) {
            let c = lid + s * WG;
            if (c < width) {
                if (head < p.n_k_head) {
                    q_out[(t * p.n_k_head + head) * p.k_dim + c] = y[s] * factor;
                } else if (is_key) {
                    k_out[(t * p.n_k_head + head - p.n_k_head) * p.k_dim + c] = y[s] * factor;
                } else {
                    v_out[(t * p.n_v_head + head - key_heads) * p.v_dim + c] = y[s];
                }
            }
        }
    }
    if (first_row != 0u) {
        return;
    }
    for (var s = 0u; s < PER_INVOCATION; s++) {
        let c = lid + s * WG;
        if (c < width) {
            for (var i = 0u; i + 1u < p.taps; i++) {
                state[i * channels() + first + c] = history(p.rows + i, first + c);
            }
        }
    }
}
