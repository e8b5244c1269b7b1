// Causal GQA softmax attention of one query row and head per workgroup over cache rows
// 0..=pos0+t. This call's k and v are read from their own tensors and written into cache rows
// pos0.. by the workgroups of each kv head's first query head; no workgroup reads those cache
// rows, so one dispatch both appends and attends. Keys are taken WG at a time with an
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

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_new: array<f32>;
@group(0) @binding(3) var<storage, read> v_new: array<f32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const MAX_DIMS: u32 = 256u;
const DIMS_PER_INVOCATION: u32 = MAX_DIMS / WG;
// Below any score; exp(NEG_HUGE − m) is 0 for every finite m.
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> q_head: array<f32, MAX_DIMS>;
var<workgroup> weights: array<f32, WG>;

// Column `col` of key row j: rows before pos0 from the cache, this call's from k_new.
fn key_at(j: u32, col: u32) -> f32 {
    if (j < p.pos0) {
        return k_cache[j * p.kv_cols + col];
    }
    return k_new[(j - p.pos0) * p.kv_cols + col];
}

fn value_at(j: u32, col: u32) -> f32 {
    if (j < p.pos0) {
        return v_cache[j * p.kv_cols + col];
    }
    return v_new[(j - p.pos0) * p.kv_cols + col];
}

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
    let group = p.n_head / p.n_kv_head;
    let kv_base = (h / group) * p.head_dim;
    let q_base = (t * p.n_head + h) * p.head_dim;
    if (h % group == 0u) {
        let src = t * p.kv_cols + kv_base;
        let dst = (p.pos0 + t) * p.kv_cols + kv_base;
        for (var d = lid; d < p.head_dim; d += WG) {
            k_cache[dst + d] = k_new[src + d];
            v_cache[dst + d] = v_new[src + d];
        }
    }
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
            for (var d = 0u; d < p.head_dim; d++) {
                dot += q_head[d] * key_at(j, kv_base + d);
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
                    a += weights[jj] * value_at(tile + jj, kv_base + d);
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
