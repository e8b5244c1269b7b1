// Gated attention §4 steps 3–4 for q and k at once: each head RMS-normed with its weight row,
// then NeoX RoPE on its first rot_dims (element d < rot_dims/2 pairs with d + rot_dims/2), row t
// at position pos0 + t. q is read from the query half of each 2·head_dim group of q_and_gate.
// One workgroup per (row, head): the q heads, then the k heads; the normed head goes through
// workgroup memory because RoPE mixes elements that different invocations own.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    rot_dims: u32,
    pos0: u32,
    rows: u32,
    eps: f32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q_and_gate: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> q_norm: array<f32>;
@group(0) @binding(4) var<storage, read> k_norm: array<f32>;
@group(0) @binding(5) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(6) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(7) var<storage, read_write> k_out: array<f32>;

// Elements per invocation: heads up to PER_INVOCATION · WG wide.
const PER_INVOCATION: u32 = 4u;

var<workgroup> normed: array<f32, PER_INVOCATION * WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let heads = p.n_head + p.n_kv_head;
    let id = workgroup_index(wid, nwg);
    let t = id / heads;
    let head = id % heads;
    if (t >= p.rows) {
        return;
    }
    let is_q = head < p.n_head;
    let hd = p.head_dim;
    var src = (t * p.n_kv_head + head - p.n_head) * hd;
    if (is_q) {
        src = (t * p.n_head + head) * 2u * hd;
    }
    var x: array<f32, PER_INVOCATION>;
    var squares = 0.0;
    for (var s = 0u; s < PER_INVOCATION; s++) {
        let d = lid + s * WG;
        if (d < hd) {
            if (is_q) {
                x[s] = q_and_gate[src + d];
            } else {
                x[s] = k[src + d];
            }
            squares += x[s] * x[s];
        }
    }
    let scale = 1.0 / sqrt(workgroup_sum(squares, lid) / f32(hd) + p.eps);
    for (var s = 0u; s < PER_INVOCATION; s++) {
        let d = lid + s * WG;
        if (d < hd) {
            normed[d] = x[s] * scale * select(k_norm[d], q_norm[d], is_q);
        }
    }
    workgroupBarrier();
    let half = p.rot_dims / 2u;
    let pos = f32(p.pos0 + t);
    var dst = (t * p.n_kv_head + head - p.n_head) * hd;
    if (is_q) {
        dst = (t * p.n_head + head) * hd;
    }
    for (var s = 0u; s < PER_INVOCATION; s++) {
        let d = lid + s * WG;
        if (d < hd) {
            var y = normed[d];
            if (d < p.rot_dims) {
                let r = rotation(pos, inv_freq[d % half]);
                if (d < half) {
                    y = y * r.x - normed[d + half] * r.y;
                } else {
                    y = y * r.x + normed[d - half] * r.y;
                }
            }
            if (is_q) {
                q_out[dst + d] = y;
            } else {
                k_out[dst + d] = y;
            }
        }
    }
}
