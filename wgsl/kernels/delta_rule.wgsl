// The gated delta rule token by token. The columns of S (one per value dimension j) evolve
// independently:
//   S ← S·exp(g);  δ = β(v − Sᵀk);  S ← S + k δᵀ;  o = Sᵀq.
// One workgroup per (value head, COLS columns): each of its SLICES × COLS invocations keeps up to
// KEYS_PER_SLICE key rows of one column in registers for the whole call, so the state is read
// once and written once however many rows the call has; the two sums over keys (Sᵀk, Sᵀq) add the
// slices' parts through workgroup memory.
// Its operands are delta_rule_operands.wgsl's.

const MAX_K_DIM: u32 = 256u;
const COLS: u32 = 16u;
const SLICES: u32 = 16u;
const KEYS_PER_SLICE: u32 = MAX_K_DIM / SLICES;

var<workgroup> q_t: array<f32, MAX_K_DIM>;
var<workgroup> k_t: array<f32, MAX_K_DIM>;
var<workgroup> parts: array<f32, COLS * SLICES>;

// The sum of the slices' parts of column `col`.
fn column_sum(col: u32) -> f32 {
    var total = 0.0;
    for (var slice = 0u; slice < SLICES; slice++) {
        total += parts[slice * COLS + col];
    }
    return total;
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let h = id / p.column_chunks;
    if (h >= p.n_v_head) {
        return;
    }
    let col = lid % COLS;
    let slice = lid / COLS;
    let j = (id % p.column_chunks) * COLS + col;
    let live = j < p.v_dim;
    let keys = (p.k_dim + SLICES - 1u) / SLICES;
    let first_key = slice * keys;
    let qk_base = (h % p.n_k_head) * p.k_dim;
    let qk_cols = p.n_k_head * p.k_dim;
    let v_cols = p.n_v_head * p.v_dim;
    let s_base = h * p.k_dim * p.v_dim + j;
    var s: array<f32, KEYS_PER_SLICE>;
    for (var e = 0u; e < KEYS_PER_SLICE; e++) {
        if (live && e < keys && first_key + e < p.k_dim) {
            s[e] = state[s_base + (first_key + e) * p.v_dim];
        }
    }
    for (var t = 0u; t < p.rows; t++) {
        for (var i = lid; i < p.k_dim; i += COLS * SLICES) {
            q_t[i] = q[t * qk_cols + qk_base + i];
            k_t[i] = k[t * qk_cols + qk_base + i];
        }
        workgroupBarrier();
        let g_beta = gates(t, h);
        let beta = g_beta.y;
        let decay = exp(g_beta.x);
        var recalled = 0.0;
        for (var e = 0u; e < KEYS_PER_SLICE; e++) {
            if (e < keys && first_key + e < p.k_dim) {
                s[e] *= decay;
                recalled += s[e] * k_t[first_key + e];
            }
        }
        parts[lid] = recalled;
        workgroupBarrier();
        let o_at = t * v_cols + h * p.v_dim + j;
        var delta = 0.0;
        if (live) {
            delta = beta * (v[o_at] - column_sum(col));
        }
        // Everyone has read the parts before they are overwritten.
        workgroupBarrier();
        var o = 0.0;
        for (var e = 0u; e < KEYS_PER_SLICE; e++) {
            if (e < keys && first_key + e < p.k_dim) {
                s[e] += k_t[first_key + e] * delta;
                o += s[e] * q_t[first_key + e];
            }
        }
        parts[lid] = o;
        workgroupBarrier();
        if (live && slice == 0u) {
            out[o_at] = column_sum(col);
        }
        // q_t, k_t and the parts are rewritten for the next row.
        workgroupBarrier();
    }
    for (var e = 0u; e < KEYS_PER_SLICE; e++) {
        if (live && e < keys && first_key + e < p.k_dim) {
            state[s_base + (first_key + e) * p.v_dim] = s[e];
        }
    }
}
