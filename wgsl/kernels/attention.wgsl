// Causal GQA softmax attention of one query row and head per workgroup over cache rows
// 0..=pos0+t. This call's k and v are read from their own tensors and written into cache rows
// pos0.. by the workgroups of each kv head's first query head; no workgroup reads those cache
// rows, so one dispatch both appends and attends.
//
// Keys are taken TILE at a time with an online softmax. Invocation i owns dimensions 4i..4i+3 of
// the head, so every key and value row is read with one coalesced vec4 load per invocation:
// the per-dimension products of all TILE keys go to workgroup memory, invocation j then sums key
// j's row of them into its score, and the weighted values accumulate in each invocation's vec4.
// With `gated` the output is multiplied by sigmoid(gate), the gate half of each 2·head_dim group
// of `gate_src` (the q projection's output); otherwise gate_src is unread.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    rows: u32,
    pos0: u32,
    kv_cols: u32,
    scale: f32,
    gated: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<KvQuad>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<KvQuad>;
@group(0) @binding(6) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> gate_src: array<vec4<f32>>;

// Keys per tile: one score per invocation.
const TILE: u32 = WG;
// A row of products is padded by one so that the invocations summing different rows read
// different banks.
const ROW: u32 = WG + 1u;
// Below any score; exp(NEG_HUGE − m) is 0 for every finite m.
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> products: array<f32, TILE * ROW>;
var<workgroup> weights: array<f32, TILE>;

// vec4 `lane` of key row j: rows before pos0 from the cache, this call's from k_new.
fn key_at(j: u32, lane: u32) -> vec4<f32> {
    if (j < p.pos0) {
        return kv_quad_values(k_cache[j * p.kv_cols / 4u + lane]);
    }
    return k_new[(j - p.pos0) * p.kv_cols / 4u + lane];
}

fn value_at(j: u32, lane: u32) -> vec4<f32> {
    if (j < p.pos0) {
        return kv_quad_values(v_cache[j * p.kv_cols / 4u + lane]);
    }
    return v_new[(j - p.pos0) * p.kv_cols / 4u + lane];
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
    let lanes = p.head_dim / 4u;
    let owns = lid < lanes;
    // Invocations past the head's last vec4 read lane 0 and discard it.
    let lane = select(0u, lid, owns);
    let kv_lane = (h / group) * lanes + lane;
    let q_index = (t * p.n_head + h) * lanes + lane;
    if (h % group == 0u && owns) {
        let src = t * p.kv_cols / 4u + kv_lane;
        let dst = (p.pos0 + t) * p.kv_cols / 4u + kv_lane;
        k_cache[dst] = kv_quad(k_new[src]);
        v_cache[dst] = kv_quad(v_new[src]);
    }
    let q_part = select(vec4<f32>(0.0), q[q_index], owns);

    let seen = p.pos0 + t + 1u;
    var running_max = NEG_HUGE;
    var running_sum = 0.0;
    var acc = vec4<f32>(0.0);
    for (var tile = 0u; tile < seen; tile += TILE) {
        let tile_len = min(TILE, seen - tile);
        for (var jj = 0u; jj < tile_len; jj++) {
            products[jj * ROW + lid] = dot(q_part, key_at(tile + jj, kv_lane));
        }
        workgroupBarrier();
        var score = NEG_HUGE;
        if (lid < tile_len) {
            var dot_sum = 0.0;
            for (var i = 0u; i < lanes; i++) {
                dot_sum += products[lid * ROW + i];
            }
            score = dot_sum * p.scale;
        }
        let new_max = max(running_max, workgroup_max(score, lid));
        let correction = exp(running_max - new_max);
        var weight = 0.0;
        if (lid < tile_len) {
            weight = exp(score - new_max);
        }
        weights[lid] = weight;
        running_sum = running_sum * correction + workgroup_sum(weight, lid);
        running_max = new_max;
        acc *= correction;
        for (var jj = 0u; jj < tile_len; jj++) {
            acc += weights[jj] * value_at(tile + jj, kv_lane);
        }
        // `products` and `weights` are rewritten by the next tile.
        workgroupBarrier();
    }
    if (owns) {
        var o = acc / running_sum;
        if (p.gated != 0u) {
            let gate = gate_src[((t * p.n_head + h) * 2u + 1u) * lanes + lane];
            o *= 1.0 / (1.0 + exp(-gate));
        }
        out[q_index] = o;
    }
}
