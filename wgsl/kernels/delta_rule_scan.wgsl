// The gated delta rule over many tokens in one pass, token by token:
//   S ← S·exp(g);  δ = β(v − Sᵀk);  S ← S + k δᵀ;  o = Sᵀq.
// Every column j of a head's state (one per value dimension) is a recurrence of its own, so a
// prefill is value heads × v_dim independent scans. LANES neighbouring invocations of one
// subgroup share a column, invocation `slice` holding key rows slice, slice + LANES, … in
// registers for the whole call; the two sums over keys (Sᵀk, Sᵀq) are shuffles within those
// lanes, so no token waits on a workgroup barrier. The operands reach the scan in chunks of
// CHUNK tokens through workgroup memory: the workgroup loads a chunk with coalesced reads into
// registers while it scans the one before, so the scan itself only reads workgroup memory.
// The host builds this kernel only where subgroups have a fixed size that is a multiple of LANES,
// and takes it for k_dim ≤ MAX_K_DIM.
// Its operands are delta_rule_operands.wgsl's (`column_chunks` counts blocks of COLS columns).

const LANES: u32 = 8u;
const KEYS: u32 = 16u;
const MAX_K_DIM: u32 = LANES * KEYS;
// State columns per workgroup.
const COLS: u32 = WG / LANES;
const CHUNK: u32 = 32u;
// Values of a chunk's q (and k) rows, and of its v columns, that each invocation loads.
const QK_LOADS: u32 = CHUNK * MAX_K_DIM / WG;
const V_LOADS: u32 = CHUNK * COLS / WG;

// A chunk's q and k rows (MAX_K_DIM wide, zeros past k_dim), the workgroup's v columns, and
// per token the decay factor exp(g) and the write strength β.
var<workgroup> q_chunk: array<f32, CHUNK * MAX_K_DIM>;
var<workgroup> k_chunk: array<f32, CHUNK * MAX_K_DIM>;
var<workgroup> v_chunk: array<f32, CHUNK * COLS>;
var<workgroup> decay_chunk: array<f32, CHUNK>;
var<workgroup> beta_chunk: array<f32, CHUNK>;

// One invocation's share of a chunk, loaded ahead into registers.
struct Share {
    q: array<f32, QK_LOADS>,
    k: array<f32, QK_LOADS>,
    v: array<f32, V_LOADS>,
    decay: f32,
    beta: f32,
}

// The workgroup's place: value head h, its key head's first column in a row of q and k, and the
// first of its state columns.
struct Place {
    h: u32,
    qk_base: u32,
    first_col: u32,
}

// Invocation lid's share of the chunk of tokens from `first`: zeros past the last token, k_dim
// and v_dim, which leave the state and the sums unchanged.
fn load_share(first: u32, at: Place, lid: u32) -> Share {
    var share: Share;
    for (var i = 0u; i < QK_LOADS; i++) {
        let e = lid + i * WG;
        let t = first + e / MAX_K_DIM;
        let c = e % MAX_K_DIM;
        share.q[i] = 0.0;
        share.k[i] = 0.0;
        if (t < p.rows && c < p.k_dim) {
            let src = t * p.n_k_head * p.k_dim + at.qk_base + c;
            share.q[i] = q[src];
            share.k[i] = k[src];
        }
    }
    for (var i = 0u; i < V_LOADS; i++) {
        let e = lid + i * WG;
        let t = first + e / COLS;
        let j = at.first_col + e % COLS;
        share.v[i] = 0.0;
        if (t < p.rows && j < p.v_dim) {
            share.v[i] = v[(t * p.n_v_head + at.h) * p.v_dim + j];
        }
    }
    share.decay = 1.0;
    share.beta = 0.0;
    let t = first + lid;
    if (lid < CHUNK && t < p.rows) {
        let g_beta = gates(t, at.h);
        share.decay = exp(g_beta.x);
        share.beta = g_beta.y;
    }
    return share;
}

fn store_share(share: Share, lid: u32) {
    for (var i = 0u; i < QK_LOADS; i++) {
        q_chunk[lid + i * WG] = share.q[i];
        k_chunk[lid + i * WG] = share.k[i];
    }
    for (var i = 0u; i < V_LOADS; i++) {
        v_chunk[lid + i * WG] = share.v[i];
    }
    if (lid < CHUNK) {
        decay_chunk[lid] = share.decay;
        beta_chunk[lid] = share.beta;
    }
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
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
) {
    let id = workgroup_index(wid, nwg);
    let h = id / p.column_chunks;
    if (h >= p.n_v_head) {
        return;
    }
    let at = Place(h, (h % p.n_k_head) * p.k_dim, (id % p.column_chunks) * COLS);
    let lane = sg_id * sg_size + sg_lane;
    let slice = lane % LANES;
    let col = lane / LANES;
    let j = at.first_col + col;
    let live = j < p.v_dim;
    let s_base = h * p.k_dim * p.v_dim + j;
    var s: array<f32, KEYS>;
    for (var e = 0u; e < KEYS; e++) {
        let i = slice + e * LANES;
        s[e] = 0.0;
        if (live && i < p.k_dim) {
            s[e] = state[s_base + i * p.v_dim];
        }
    }
    var share = load_share(0u, at, lid);
    for (var first = 0u; first < p.rows; first += CHUNK) {
        // The scan of the chunk before has read the workgroup's copy.
        workgroupBarrier();
        store_share(share, lid);
        workgroupBarrier();
        share = load_share(first + CHUNK, at, lid);
        let count = min(CHUNK, p.rows - first);
        for (var t = 0u; t < count; t++) {
            let row = t * MAX_K_DIM + slice;
            let decay = decay_chunk[t];
            // Two partial sums halve the chain of dependent adds.
            var recalled = vec2<f32>(0.0);
            for (var e = 0u; e < KEYS; e += 2u) {
                s[e] *= decay;
                s[e + 1u] *= decay;
                recalled += vec2<f32>(s[e], s[e + 1u]) * vec2<f32>(
                    k_chunk[row + e * LANES],
                    k_chunk[row + (e + 1u) * LANES],
                );
            }
            let recall = column_sum(recalled.x + recalled.y);
            let delta = beta_chunk[t] * (v_chunk[t * COLS + col] - recall);
            var o = vec2<f32>(0.0);
            for (var e = 0u; e < KEYS; e += 2u) {
                s[e] += k_chunk[row + e * LANES] * delta;
                s[e + 1u] += k_chunk[row + (e + 1u) * LANES] * delta;
                o += vec2<f32>(s[e], s[e + 1u]) * vec2<f32>(
                    q_chunk[row + e * LANES],
                    q_chunk[row + (e + 1u) * LANES],
                );
            }
            let total = column_sum(o.x + o.y);
            if (live && slice == 0u) {
                out[((first + t) * p.n_v_head + h) * p.v_dim + j] = total;
            }
        }
    }
    for (var e = 0u; e < KEYS; e++) {
        let i = slice + e * LANES;
        if (live && i < p.k_dim) {
            state[s_base + i * p.v_dim] = s[e];
        }
    }
}
