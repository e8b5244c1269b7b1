// Causal GQA softmax attention for many query rows at once (prefill), flash-attention style. One
// workgroup per (kv head, block of `tokens_per_block` query tokens) takes the rows (token, q head)
// of every q head that reads this kv head — up to ROWS of them — and walks the keys KEYS at a time
// with an online softmax, so each key and value row is read once per block rather than once per
// query and head:
//   scores (ROWS × KEYS) = Q·Kᵀ over head-dim slices of DIM_SLICE (both staged in workgroup
//   memory), masked to keys 0..=pos0+t; then per row the running max and sum, and the weights;
//   then the output rows, rescaled, plus weights·V over value slices of VALUE_SLICE dims.
// The workgroup also writes its tokens' k and v into cache rows pos0..; keys of this call are read
// from k_new and v_new, so no workgroup reads cache rows that another one writes. Keys and values
// go by pairs of head dims, a word of an f16 cache (kv_cache_*.wgsl); head_dim is even. With `gated`
// the output is multiplied by sigmoid(gate), the gate half of each 2·head_dim group of
// `gate_src` (the q projection's output); otherwise gate_src is unread.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    rows: u32,
    pos0: u32,
    scale: f32,
    tokens_per_block: u32,
    gated: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_new: array<f32>;
@group(0) @binding(3) var<storage, read> v_new: array<f32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<KvPair>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<KvPair>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<storage, read> gate_src: array<f32>;

const THREADS: u32 = 256u;
const ROWS: u32 = 64u;
const KEYS: u32 = 32u;
const MAX_DIMS: u32 = 256u;
const DIM_SLICE: u32 = 32u;
const VALUE_SLICE: u32 = 64u;
// Scores: invocation (row pair lid / 8, key quad lid % 8).
const SCORE_ROWS: u32 = 2u;
const SCORE_KEYS: u32 = 4u;
// Outputs: invocation (row lid / 4, VALUE_LANE dims of each value slice).
const VALUE_LANE: u32 = VALUE_SLICE / (THREADS / ROWS);
const VALUE_SLICES: u32 = MAX_DIMS / VALUE_SLICE;
// Below any score; exp(NEG_HUGE − m) is 0 for every finite m.
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> q_s: array<f32, ROWS * (DIM_SLICE + 1u)>;
var<workgroup> k_s: array<f32, KEYS * (DIM_SLICE + 1u)>;
var<workgroup> weights: array<f32, ROWS * (KEYS + 1u)>;
var<workgroup> v_s: array<f32, KEYS * VALUE_SLICE>;
var<workgroup> row_max: array<f32, ROWS>;
var<workgroup> row_sum: array<f32, ROWS>;
var<workgroup> row_rescale: array<f32, ROWS>;

// Columns col and col + 1 (col even) of key row j: rows before pos0 from the cache, this call's
// from k_new.
fn key_pair(j: u32, col: u32) -> vec2<f32> {
    let kv_cols = p.n_kv_head * p.head_dim;
    if (j < p.pos0) {
        return kv_pair_values(k_cache[(j * kv_cols + col) / 2u]);
    }
    let at = (j - p.pos0) * kv_cols + col;
    return vec2<f32>(k_new[at], k_new[at + 1u]);
}

fn value_pair(j: u32, col: u32) -> vec2<f32> {
    let kv_cols = p.n_kv_head * p.head_dim;
    if (j < p.pos0) {
        return kv_pair_values(v_cache[(j * kv_cols + col) / 2u]);
    }
    let at = (j - p.pos0) * kv_cols + col;
    return vec2<f32>(v_new[at], v_new[at + 1u]);
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let kvh = id % p.n_kv_head;
    let first_token = (id / p.n_kv_head) * p.tokens_per_block;
    // Uniform per workgroup: the whole workgroup leaves together, before any barrier.
    if (first_token >= p.rows) {
        return;
    }
    let group = p.n_head / p.n_kv_head;
    let tokens = min(p.tokens_per_block, p.rows - first_token);
    let live_rows = tokens * group;
    let kv_cols = p.n_kv_head * p.head_dim;
    let kv_base = kvh * p.head_dim;
    // Row r of the block is token first_token + r / group, q head kvh·group + r % group.

    let head_pairs = p.head_dim / 2u;
    for (var e = lid; e < tokens * head_pairs; e += THREADS) {
        let at = (first_token + e / head_pairs) * kv_cols + kv_base + 2u * (e % head_pairs);
        let dst = (p.pos0 * kv_cols + at) / 2u;
        k_cache[dst] = kv_pair(vec2<f32>(k_new[at], k_new[at + 1u]));
        v_cache[dst] = kv_pair(vec2<f32>(v_new[at], v_new[at + 1u]));
    }
    if (lid < ROWS) {
        row_max[lid] = NEG_HUGE;
        row_sum[lid] = 0.0;
    }

    let score_row = (lid / (KEYS / SCORE_KEYS)) * SCORE_ROWS;
    let score_key = (lid % (KEYS / SCORE_KEYS)) * SCORE_KEYS;
    let value_row = lid / (THREADS / ROWS);
    let value_dim = (lid % (THREADS / ROWS)) * VALUE_LANE;
    var acc: array<f32, VALUE_SLICES * VALUE_LANE>;
    let last_key = p.pos0 + first_token + tokens - 1u;
    for (var k0 = 0u; k0 <= last_key; k0 += KEYS) {
        var score: array<f32, SCORE_ROWS * SCORE_KEYS>;
        for (var d0 = 0u; d0 < p.head_dim; d0 += DIM_SLICE) {
            // The slices (and, on the first pass, the last tile's weights) are free again.
            workgroupBarrier();
            for (var e = lid; e < ROWS * DIM_SLICE; e += THREADS) {
                let r = e / DIM_SLICE;
                let d = d0 + e % DIM_SLICE;
                var value = 0.0;
                if (r < live_rows && d < p.head_dim) {
                    let t = first_token + r / group;
                    let h = kvh * group + r % group;
                    value = q[(t * p.n_head + h) * p.head_dim + d];
                }
                q_s[r * (DIM_SLICE + 1u) + e % DIM_SLICE] = value;
            }
            for (var e = lid; e < KEYS * DIM_SLICE / 2u; e += THREADS) {
                let key = e / (DIM_SLICE / 2u);
                let c = 2u * (e % (DIM_SLICE / 2u));
                var pair = vec2<f32>(0.0);
                if (k0 + key <= last_key && d0 + c < p.head_dim) {
                    pair = key_pair(k0 + key, kv_base + d0 + c);
                }
                k_s[key * (DIM_SLICE + 1u) + c] = pair.x;
                k_s[key * (DIM_SLICE + 1u) + c + 1u] = pair.y;
            }
            workgroupBarrier();
            for (var c = 0u; c < DIM_SLICE; c++) {
                for (var rr = 0u; rr < SCORE_ROWS; rr++) {
                    let qv = q_s[(score_row + rr) * (DIM_SLICE + 1u) + c];
                    for (var jj = 0u; jj < SCORE_KEYS; jj++) {
                        let kv = k_s[(score_key + jj) * (DIM_SLICE + 1u) + c];
                        score[rr * SCORE_KEYS + jj] += qv * kv;
                    }
                }
            }
        }
        for (var rr = 0u; rr < SCORE_ROWS; rr++) {
            let r = score_row + rr;
            let t = first_token + r / group;
            for (var jj = 0u; jj < SCORE_KEYS; jj++) {
                let j = k0 + score_key + jj;
                var s = NEG_HUGE;
                if (r < live_rows && j <= p.pos0 + t) {
                    s = score[rr * SCORE_KEYS + jj] * p.scale;
                }
                weights[r * (KEYS + 1u) + score_key + jj] = s;
            }
        }
        workgroupBarrier();
        if (lid < ROWS) {
            let at = lid * (KEYS + 1u);
            var tile_max = NEG_HUGE;
            for (var j = 0u; j < KEYS; j++) {
                tile_max = max(tile_max, weights[at + j]);
            }
            let old_max = row_max[lid];
            let new_max = max(old_max, tile_max);
            var tile_sum = 0.0;
            for (var j = 0u; j < KEYS; j++) {
                let w = exp(weights[at + j] - new_max);
                weights[at + j] = w;
                tile_sum += w;
            }
            let rescale = exp(old_max - new_max);
            row_rescale[lid] = rescale;
            row_sum[lid] = row_sum[lid] * rescale + tile_sum;
            row_max[lid] = new_max;
        }
        let tile_keys = min(KEYS, last_key + 1u - k0);
        for (var slice = 0u; slice < VALUE_SLICES; slice++) {
            let d0 = slice * VALUE_SLICE;
            if (d0 < p.head_dim) {
                // The weights are ready and the last slice's values are read.
                workgroupBarrier();
                for (var e = lid; e < KEYS * VALUE_SLICE / 2u; e += THREADS) {
                    let key = e / (VALUE_SLICE / 2u);
                    let c = 2u * (e % (VALUE_SLICE / 2u));
                    var pair = vec2<f32>(0.0);
                    if (k0 + key <= last_key && d0 + c < p.head_dim) {
                        pair = value_pair(k0 + key, kv_base + d0 + c);
                    }
                    v_s[2u * e] = pair.x;
                    v_s[2u * e + 1u] = pair.y;
                }
                workgroupBarrier();
                let rescale = row_rescale[value_row];
                var o: array<f32, VALUE_LANE>;
                for (var i = 0u; i < VALUE_LANE; i++) {
                    o[i] = acc[slice * VALUE_LANE + i] * rescale;
                }
                for (var j = 0u; j < tile_keys; j++) {
                    let w = weights[value_row * (KEYS + 1u) + j];
                    for (var i = 0u; i < VALUE_LANE; i++) {
                        o[i] += w * v_s[j * VALUE_SLICE + value_dim + i];
                    }
                }
                for (var i = 0u; i < VALUE_LANE; i++) {
                    acc[slice * VALUE_LANE + i] = o[i];
                }
            }
        }
    }
    workgroupBarrier();
    if (value_row < live_rows) {
        let t = first_token + value_row / group;
        let h = kvh * group + value_row % group;
        let total = row_sum[value_row];
        for (var slice = 0u; slice < VALUE_SLICES; slice++) {
            for (var i = 0u; i < VALUE_LANE; i++) {
                let d = slice * VALUE_SLICE + value_dim + i;
                if (d < p.head_dim) {
                    var o = acc[slice * VALUE_LANE + i] / total;
                    if (p.gated != 0u) {
                        let gate = gate_src[((t * p.n_head + h) * 2u + 1u) * p.head_dim + d];
                        o *= 1.0 / (1.0 + exp(-gate));
                    }
                    out[(t * p.n_head + h) * p.head_dim + d] = o;
                }
            }
        }
    }
}
