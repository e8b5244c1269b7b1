// Decode attention by query head (--per-head-attention; attention_decode.wgsl serves a kv
// head's query heads together), first pass: one query row, split over blocks of BLOCK cache
// rows so that a long context keeps many workgroups busy (attention_combine.wgsl merges the
// blocks). One workgroup per (head, block) computes its block's scores, their maximum m,
// Σ exp(s − m) and Σ exp(s − m)·v. This call's k and v (cache row pos0) are read from k_new /
// v_new and written to the cache by block 0 of each kv head's first query head
// (decode_kv_rows.wgsl).
//
// Invocation i owns dimensions 4i..4i+3 of the head: every key and value row is one coalesced
// vec4 load per invocation. Loads go UNROLL at a time so that several are in flight.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    pos0: u32,
    kv_cols: u32,
    blocks: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<KvQuad>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<KvQuad>;
// Per (head, block): max, sum, then head_dim weighted-value sums.
@group(0) @binding(6) var<storage, read_write> block_results: array<f32>;

const BLOCK: u32 = WG;
const UNROLL: u32 = 8u;
// A row of products is padded by one so that the invocations summing different rows read
// different banks.
const ROW: u32 = WG + 1u;
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> products: array<f32, BLOCK * ROW>;
var<workgroup> weights: array<f32, BLOCK>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let h = id / p.blocks;
    let block = id % p.blocks;
    if (h >= p.n_head) {
        return;
    }
    let group = p.n_head / p.n_kv_head;
    let lanes = p.head_dim / 4u;
    let owns = lid < lanes;
    let lane = select(0u, lid, owns);
    let kv_lane = (h / group) * lanes + lane;
    if (block == 0u && h % group == 0u && owns) {
        append_kv(kv_lane);
    }
    let q_part = select(vec4<f32>(0.0), q[h * lanes + lane], owns);
    let first = block * BLOCK;
    let len = min(BLOCK, p.pos0 + 1u - first);

    for (var jj = 0u; jj < len; jj += UNROLL) {
        var keys: array<vec4<f32>, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            keys[u] = key_at(first + min(jj + u, len - 1u), kv_lane);
        }
        for (var u = 0u; u < UNROLL; u++) {
            if (jj + u < len) {
                products[(jj + u) * ROW + lid] = dot(q_part, keys[u]);
            }
        }
    }
    workgroupBarrier();
    var score = NEG_HUGE;
    if (lid < len) {
        var dot_sum = 0.0;
        for (var i = 0u; i < lanes; i++) {
            dot_sum += products[lid * ROW + i];
        }
        score = dot_sum * p.scale;
    }
    let block_max = workgroup_max(score, lid);
    var weight = 0.0;
    if (lid < len) {
        weight = exp(score - block_max);
    }
    weights[lid] = weight;
    let block_sum = workgroup_sum(weight, lid);

    var acc = vec4<f32>(0.0);
    for (var jj = 0u; jj < len; jj += UNROLL) {
        var values: array<vec4<f32>, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            values[u] = value_at(first + min(jj + u, len - 1u), kv_lane);
        }
        for (var u = 0u; u < UNROLL; u++) {
            if (jj + u < len) {
                acc += weights[jj + u] * values[u];
            }
        }
    }
    let base = (h * p.blocks + block) * (2u + p.head_dim);
    if (lid == 0u) {
        block_results[base] = block_max;
        block_results[base + 1u] = block_sum;
    }
    if (owns) {
        let d = base + 2u + 4u * lane;
        block_results[d] = acc.x;
        block_results[d + 1u] = acc.y;
        block_results[d + 2u] = acc.z;
        block_results[d + 3u] = acc.w;
    }
}
