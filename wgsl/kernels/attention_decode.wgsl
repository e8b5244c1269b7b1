// Decode attention (one query row) past a short cache, as flash decoding: one workgroup per kv
// head, run of up to HEADS query heads of its GQA group, and split of the cache rows, so that
// every key and value row is loaded once for all the query heads it serves. Each split writes its
// heads' max m, Σ exp(s − m) and Σ exp(s − m)·v in attention_blocks.wgsl's layout, for
// attention_combine.wgsl to merge (and gate). Short caches take the per-head kernels
// (attention_blocks.wgsl): a workgroup per kv head is too few workgroups to fill a GPU there.
//
// The split is walked in tiles of TILE rows with an online softmax. Scores: invocation r dots
// row r of the tile with every head's q, held in workgroup memory (all invocations read the
// same word: a broadcast), so a score needs no reduction across invocations, and a tile's keys
// are all in flight at once. Values: invocation i owns vec4 i % lanes of the head and rows
// i / lanes, i / lanes + row_groups, … of the tile, so that each value row is one coalesced
// load; the row groups' sums are added at the end.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    pos0: u32,
    kv_cols: u32,
    // Cache rows per split (the last may have fewer), and splits.
    split_rows: u32,
    splits: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<KvQuad>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<KvQuad>;
// Per (head, split): max, sum and head_dim weighted-value sums.
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Query heads per workgroup; a larger GQA group takes several workgroups per kv head.
const HEADS: u32 = 8u;
// vec4s of the widest head (head_dim 256, the host's limit).
const MAX_LANES: u32 = 64u;
// A tile is one row per invocation.
const TILE: u32 = WG;
const UNROLL: u32 = 8u;
const NEG_HUGE: f32 = -3.0e38;

// The heads' q; after the last tile, the row groups' weighted sums, a round of groups at a time.
var<workgroup> q_heads: array<vec4<f32>, HEADS * MAX_LANES>;
// By head, then row of the tile: the scores, reduced to the tile's maximum; then the weights;
// after the last tile, the row groups' weight sums. Head-major, so that the invocations of one
// head's reduction touch consecutive words.
var<workgroup> by_head: array<f32, HEADS * TILE>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = workgroup_index(wid, nwg);
    let group = p.n_head / p.n_kv_head;
    let runs = (group + HEADS - 1u) / HEADS;
    let split = id % p.splits;
    let run = (id / p.splits) % runs;
    let kv_head = id / p.splits / runs;
    if (kv_head >= p.n_kv_head) {
        return;
    }
    let first_head = kv_head * group + run * HEADS;
    let heads = min(HEADS, group - run * HEADS);
    let lanes = p.head_dim / 4u;
    let kv_base = kv_head * lanes;
    if (split == 0u && run == 0u && lid < lanes) {
        append_kv(kv_base + lid);
    }
    for (var i = lid; i < HEADS * lanes; i += WG) {
        let h = i / lanes;
        let lane = i % lanes;
        var q_part = vec4<f32>(0.0);
        if (h < heads) {
            q_part = q[(first_head + h) * lanes + lane];
        }
        q_heads[h * MAX_LANES + lane] = q_part;
    }
    workgroupBarrier();

    let row_groups = WG / lanes;
    let row_group = lid / lanes;
    let lane = lid % lanes;
    let first = split * p.split_rows;
    let end = min(first + p.split_rows, p.pos0 + 1u);
    var running_max: array<f32, HEADS>;
    var sums: array<f32, HEADS>;
    var acc: array<vec4<f32>, HEADS>;
    for (var h = 0u; h < HEADS; h++) {
        running_max[h] = NEG_HUGE;
        sums[h] = 0.0;
        acc[h] = vec4<f32>(0.0);
    }
    for (var tile = first; tile < end; tile += TILE) {
        let len = min(TILE, end - tile);
        var scores: array<f32, HEADS>;
        for (var h = 0u; h < HEADS; h++) {
            scores[h] = 0.0;
        }
        if (lid < len) {
            for (var l = 0u; l < lanes; l += UNROLL) {
                var keys: array<vec4<f32>, UNROLL>;
                for (var u = 0u; u < UNROLL; u++) {
                    keys[u] = key_at(tile + lid, kv_base + min(l + u, lanes - 1u));
                }
                for (var u = 0u; u < UNROLL; u++) {
                    if (l + u < lanes) {
                        for (var h = 0u; h < HEADS; h++) {
                            if (h < heads) {
                                scores[h] += dot(q_heads[h * MAX_LANES + l + u], keys[u]);
                            }
                        }
                    }
                }
            }
        }
        for (var h = 0u; h < HEADS; h++) {
            scores[h] = select(NEG_HUGE, scores[h] * p.scale, lid < len);
            by_head[h * TILE + lid] = scores[h];
        }
        workgroupBarrier();
        for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
            if (lid < stride) {
                for (var h = 0u; h < HEADS; h++) {
                    let other = by_head[h * TILE + lid + stride];
                    by_head[h * TILE + lid] = max(by_head[h * TILE + lid], other);
                }
            }
            workgroupBarrier();
        }
        var correction: array<f32, HEADS>;
        for (var h = 0u; h < HEADS; h++) {
            let new_max = max(running_max[h], by_head[h * TILE]);
            correction[h] = exp(running_max[h] - new_max);
            running_max[h] = new_max;
        }
        // Every maximum is read before the weights overwrite them.
        workgroupBarrier();
        for (var h = 0u; h < HEADS; h++) {
            acc[h] *= correction[h];
            sums[h] *= correction[h];
            by_head[h * TILE + lid] = select(0.0, exp(scores[h] - running_max[h]), lid < len);
        }
        workgroupBarrier();
        if (row_group < row_groups) {
            for (var r = row_group; r < len; r += row_groups * UNROLL) {
                var values: array<vec4<f32>, UNROLL>;
                for (var u = 0u; u < UNROLL; u++) {
                    let row = min(r + u * row_groups, len - 1u);
                    values[u] = value_at(tile + row, kv_base + lane);
                }
                for (var u = 0u; u < UNROLL; u++) {
                    let row = r + u * row_groups;
                    if (row < len) {
                        for (var h = 0u; h < HEADS; h++) {
                            let w = by_head[h * TILE + row];
                            acc[h] += w * values[u];
                            sums[h] += w;
                        }
                    }
                }
            }
        }
        // The weights are read before the next tile (or the merge) overwrites them.
        workgroupBarrier();
    }

    // The row groups' sums into group 0's: the weight sums at once, the weighted sums as many
    // groups a round as q_heads holds.
    if (row_group < row_groups && lane == 0u) {
        for (var h = 0u; h < HEADS; h++) {
            by_head[row_group * HEADS + h] = sums[h];
        }
    }
    let per_round = MAX_LANES / lanes;
    for (var round_first = 1u; round_first < row_groups; round_first += per_round) {
        let round_end = min(round_first + per_round, row_groups);
        workgroupBarrier();
        if (row_group >= round_first && row_group < round_end) {
            for (var h = 0u; h < HEADS; h++) {
                q_heads[((row_group - round_first) * HEADS + h) * lanes + lane] = acc[h];
            }
        }
        workgroupBarrier();
        if (row_group == 0u) {
            for (var g = round_first; g < round_end; g++) {
                for (var h = 0u; h < HEADS; h++) {
                    acc[h] += q_heads[((g - round_first) * HEADS + h) * lanes + lane];
                    sums[h] += by_head[g * HEADS + h];
                }
            }
        }
    }
    if (row_group != 0u) {
        return;
    }
    for (var h = 0u; h < HEADS; h++) {
        if (h < heads) {
            let head = first_head + h;
            let o = acc[h];
            let at = (head * p.splits + split) * (2u + p.head_dim) + 2u + 4u * lane;
            if (lane == 0u) {
                out[at - 2u] = running_max[h];
                out[at - 1u] = sums[h];
            }
            out[at] = o.x;
            out[at + 1u] = o.y;
            out[at + 2u] = o.z;
            out[at + 3u] = o.w;
        }
    }
}
