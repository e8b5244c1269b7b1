// The gated delta rule over many tokens in one pass, token by token:
//   S ← S·exp(g);  δ = β(v − Sᵀk);  S ← S + k δᵀ;  o = Sᵀq.
// Every column j of a head's state (one per value dimension) is a recurrence of its own, so a
// prefill is value heads × v_dim independent scans. LANES neighbouring invocations of one
// subgroup share a column, invocation `slice` holding key rows slice, slice + LANES, … in
// registers for the whole call; the two sums over keys (Sᵀk, Sᵀq) are shuffles within those
// lanes, so no token waits on a workgroup barrier, and the next token's operands are loaded
// before the current token's arithmetic. The host builds this kernel only where subgroups have
// a fixed size that is a multiple of LANES, and takes it for k_dim ≤ LANES · KEYS.
// With `raw_gates` the decay and write strength come from the projections as they are
// (g = ssm_a·softplus(alpha + dt_bias), β = sigmoid(beta), as delta_net_gates.wgsl computes);
// otherwise `gate` and `strength` hold g and β, and ssm_a and dt_bias are unread.

struct Params {
    n_k_head: u32,
    n_v_head: u32,
    k_dim: u32,
    v_dim: u32,
    rows: u32,
    column_blocks: u32,
    raw_gates: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> gate: array<f32>;
@group(0) @binding(5) var<storage, read> strength: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(9) var<storage, read> dt_bias: array<f32>;

const LANES: u32 = 8u;
const KEYS: u32 = 16u;
// State columns per workgroup.
const COLS: u32 = WG / LANES;

// One token's operands as one lane needs them: its key rows of q and k, the column's v, and the
// head's decay factor exp(g) and write strength β.
struct Token {
    q: array<f32, KEYS>,
    k: array<f32, KEYS>,
    v: f32,
    decay: f32,
    beta: f32,
}

// Token t's operands for key rows slice + LANES·e of key head offset qk_base and value index
// v_at; zeros past the last token and past k_dim, which leave the state and the sums unchanged.
fn load_token(t: u32, h: u32, qk_base: u32, slice: u32, v_at: u32, live: bool) -> Token {
    var token: Token;
    token.v = 0.0;
    token.decay = 1.0;
    token.beta = 0.0;
    for (var e = 0u; e < KEYS; e++) {
        token.q[e] = 0.0;
        token.k[e] = 0.0;
    }
    if (t >= p.rows) {
        return token;
    }
    let qk_row = t * p.n_k_head * p.k_dim + qk_base;
    for (var e = 0u; e < KEYS; e++) {
        let i = slice + e * LANES;
        if (i < p.k_dim) {
            token.q[e] = q[qk_row + i];
            token.k[e] = k[qk_row + i];
        }
    }
    if (live) {
        token.v = v[t * p.n_v_head * p.v_dim + v_at];
    }
    let at = t * p.n_v_head + h;
    var g = gate[at];
    var beta = strength[at];
    if (p.raw_gates != 0u) {
        g = ssm_a[h] * softplus(g + dt_bias[h]);
        beta = 1.0 / (1.0 + exp(-beta));
    }
    token.decay = exp(g);
    token.beta = beta;
    return token;
}

// The sum of x over the LANES lanes of this column, in every one of them.
fn column_sum(x: f32) -> f32 {
    var total = x;
    for (var offset = 1u; offset < LANES; offset <<= 1u) {
        total += subgroupShuffleXor(total, offset);
    }
    return total;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
) {
    let id = workgroup_index(wid, nwg);
    let h = id / p.column_blocks;
    if (h >= p.n_v_head) {
        return;
    }
    let lane = sg_id * sg_size + sg_lane;
    let slice = lane % LANES;
    let j = (id % p.column_blocks) * COLS + lane / LANES;
    let live = j < p.v_dim;
    let qk_base = (h % p.n_k_head) * p.k_dim;
    let v_at = h * p.v_dim + j;
    let s_base = h * p.k_dim * p.v_dim + j;
    var s: array<f32, KEYS>;
    for (var e = 0u; e < KEYS; e++) {
        let i = slice + e * LANES;
        s[e] = 0.0;
        if (live && i < p.k_dim) {
            s[e] = state[s_base + i * p.v_dim];
        }
    }
    var token = load_token(0u, h, qk_base, slice, v_at, live);
    for (var t = 0u; t < p.rows; t++) {
        let next = load_token(t + 1u, h, qk_base, slice, v_at, live);
        var recalled = 0.0;
        for (var e = 0u; e < KEYS; e++) {
            s[e] *= token.decay;
            recalled += s[e] * token.k[e];
        }
        let delta = token.beta * (token.v - column_sum(recalled));
        var o = 0.0;
        for (var e = 0u; e < KEYS; e++) {
            s[e] += token.k[e] * delta;
            o += s[e] * token.q[e];
        }
        o = column_sum(o);
        if (live && slice == 0u) {
            out[t * p.n_v_head * p.v_dim + v_at] = o;
        }
        token = next;
    }
    for (var e = 0u; e < KEYS; e++) {
        let i = slice + e * LANES;
        if (live && i < p.k_dim) {
            state[s_base + i * p.v_dim] = s[e];
        }
    }
}
