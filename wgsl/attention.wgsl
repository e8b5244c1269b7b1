// Causal GQA softmax attention of one query row and head per workgroup over cache rows
// 0..=pos0+t (the caches already hold this call's k and v). Keys are taken WG at a time with an
// online softmax: each invocation scores one key of the tile, then owns up to MAX_DIMS/WG output
// dimensions and accumulates the tile's weighted values into them.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    rows: u32,
    pos0: u32,
    kv_cols: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const MAX_DIMS: u32 = 256u;
const DIMS_PER_INVOCATION: u32 = MAX_DIMS / WG;
// Below any score; exp(NEG_HUGE − m) is 0 for every finite m.
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> q_head: array<f32, MAX_DIMS>;
var<workgroup> weights: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let t = id / p.n_head;
    let h = id % p.n_head;
    if (t >= p.rows) {
        return;
    }
    let kv_base = (h / (p.n_head / p.n_kv_head)) * p.head_dim;
    let q_base = (t * p.n_head + h) * p.head_dim;
    for (var d = lid; d < p.head_dim; d += WG) {
        q_head[d] = q[q_base + d];
    }
    workgroupBarrier();

    let seen = p.pos0 + t + 1u;
    var running_max = NEG_HUGE;
    var running_sum = 0.0;
    var acc: array<f32, DIMS_PER_INVOCATION>;
    for (var tile = 0u; tile < seen; tile += WG) {
        let j = tile + lid;
        var score = NEG_HUGE;
        if (j < seen) {
            var dot = 0.0;
            let k_row = j * p.kv_cols + kv_base;
            for (var d = 0u; d < p.head_dim; d++) {
                dot += q_head[d] * k_cache[k_row + d];
            }
            score = dot * p.scale;
        }
        let new_max = max(running_max, workgroup_max(score, lid));
        let correction = exp(running_max - new_max);
        var weight = 0.0;
        if (j < seen) {
            weight = exp(score - new_max);
        }
        weights[lid] = weight;
        running_sum = running_sum * correction + workgroup_sum(weight, lid);
        running_max = new_max;
        let tile_len = min(WG, seen - tile);
        for (var slot = 0u; slot < DIMS_PER_INVOCATION; slot++) {
            let d = lid + slot * WG;
            if (d < p.head_dim) {
                var a = acc[slot] * correction;
                for (var jj = 0u; jj < tile_len; jj++) {
                    a += weights[jj] * v_cache[(tile + jj) * p.kv_cols + kv_base + d];
                }
                acc[slot] = a;
            }
        }
        // `weights` is rewritten by the next tile.
        workgroupBarrier();
    }
    for (var slot = 0u; slot < DIMS_PER_INVOCATION; slot++) {
        let d = lid + slot * WG;
        if (d < p.head_dim) {
            out[q_base + d] = acc[slot] / running_sum;
        }
    }
}
