// The gated delta rule token by token. One workgroup per (value head, chunk of WG state columns):
// the columns of S (one per value dimension j) evolve independently, so each invocation owns a
// column and needs no reduction:
//   S ← S·exp(g);  δ = β(v − Sᵀk);  S ← S + k δᵀ;  o = Sᵀq.
// S is the f32 state row of the head (k_dim × v_dim, key index major), read and written in place.

struct Params {
    n_k_head: u32,
    n_v_head: u32,
    k_dim: u32,
    v_dim: u32,
    rows: u32,
    column_chunks: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> g: array<f32>;
@group(0) @binding(5) var<storage, read> beta: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

const MAX_K_DIM: u32 = 256u;

var<workgroup> q_t: array<f32, MAX_K_DIM>;
var<workgroup> k_t: array<f32, MAX_K_DIM>;

@compute @workgroup_size(WG)
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
    let j = (id % p.column_chunks) * WG + lid;
    let qk_base = (h % p.n_k_head) * p.k_dim;
    let qk_cols = p.n_k_head * p.k_dim;
    let v_cols = p.n_v_head * p.v_dim;
    let s_base = h * p.k_dim * p.v_dim + j;
    for (var t = 0u; t < p.rows; t++) {
        for (var i = lid; i < p.k_dim; i += WG) {
            q_t[i] = q[t * qk_cols + qk_base + i];
            k_t[i] = k[t * qk_cols + qk_base + i];
        }
        workgroupBarrier();
        if (j < p.v_dim) {
            let decay = exp(g[t * p.n_v_head + h]);
            var recalled = 0.0;
            for (var i = 0u; i < p.k_dim; i++) {
                let s = state[s_base + i * p.v_dim] * decay;
                state[s_base + i * p.v_dim] = s;
                recalled += s * k_t[i];
            }
            let o_at = t * v_cols + h * p.v_dim + j;
            let delta = beta[t * p.n_v_head + h] * (v[o_at] - recalled);
            var o = 0.0;
            for (var i = 0u; i < p.k_dim; i++) {
                let s = state[s_base + i * p.v_dim] + k_t[i] * delta;
                state[s_base + i * p.v_dim] = s;
                o += s * q_t[i];
            }
            out[o_at] = o;
        }
        // q_t and k_t are rewritten for the next row.
        workgroupBarrier();
    }
}
