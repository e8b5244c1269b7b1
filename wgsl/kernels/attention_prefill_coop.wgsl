// Causal GQA softmax attention for many query rows at once (prefill) on cooperative matrices
// (tensor cores), over the f16 copies of attention_prefill_halves.wgsl: q scaled by
// log2(e)/sqrt(head_dim), so that scores are in powers of 2, and k and v with their keys padded
// with zeros to whole tiles of KEYS; all head-major, head dims padded to whole DEPTH slices.
// One workgroup per (kv head, block of `tokens_per_block` tokens) takes the ROWS rows (token,
// q head) of every q head that reads this kv head, so each key and value tile is loaded once for
// all of them, and walks the key tiles up to its last token (later tiles are skipped, the last
// ones masked). A cooperative accumulator cannot be rescaled row by row, so the softmax takes
// two passes over the keys instead of an online rescale: the first finds each row's largest
// score, the second weighs each key by exp2(score − largest) (in f32, then f16 for the product)
// and accumulates weights·V into f32 accumulators that never need rescaling, and the weights'
// sum in f32 per row.
// Each subgroup owns BLOCK rows: their scores against 2·BLOCK keys of each tile
//   S = Q·Kᵀ (A = q rows, row-major; B = Kᵀ: key rows read column-major),
// and their outputs in 8·BLOCK head dims
//   O += P·V (A = weights, row-major; B = value rows, row-major);
// the workgroup has as many subgroups as cover a tile (the host gives BLOCK and SUBGROUP_SIZE:
// 8 subgroups of 32 with 16 × 16 blocks on tensor cores, 32 of 8 with 8 × 8 blocks on lavapipe).
// Scores go through workgroup memory for the softmax, 4 invocations a row. The output is divided
// by the sum and, with `gated`, multiplied by sigmoid of the gate half of each 2·head_dim group
// of `gate_src` (the q projection's output); it goes out through a per-subgroup staging block.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    rows: u32,
    pos0: u32,
    padded_dim: u32,
    padded_keys: u32,
    tokens_per_block: u32,
    gated: u32,
    workgroups: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q16: array<u32>;
@group(0) @binding(2) var<storage, read> k16: array<u32>;
@group(0) @binding(3) var<storage, read> v16: array<u32>;
@group(0) @binding(4) var<storage, read> gate_src: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const ROWS: u32 = 64u;
// Keys per tile; equal to DEPTH, so that the weight tile has the q and kv tiles' stride.
const KEYS: u32 = 64u;
const DEPTH: u32 = 64u;
// A subgroup per BLOCK rows and 2·BLOCK keys of a tile.
const SUBGROUPS: u32 = (ROWS / BLOCK) * (KEYS / (2u * BLOCK));
const THREADS: u32 = SUBGROUPS * SUBGROUP_SIZE;
// Eight halves of padding keep every tile row 16-byte aligned, as cooperative loads require.
const TILE_STRIDE: u32 = DEPTH + 8u;
const SCORE_STRIDE: u32 = KEYS + 4u;
// Words (two halves each) of a tile row, and of a tile each invocation fetches.
const ROW_WORDS: u32 = DEPTH / 2u;
const FETCHES: u32 = ROWS * ROW_WORDS / THREADS;
// Values: BLOCK keys of every head dim at a time.
const MAX_DIM: u32 = 256u;
const VALUE_STRIDE: u32 = MAX_DIM + 8u;
const VALUE_ROW_WORDS: u32 = MAX_DIM / 2u;
const VALUE_FETCHES: u32 = BLOCK * VALUE_ROW_WORDS / THREADS;
// Softmax: invocation (row lid / PARTS) takes keys lid % PARTS + PARTS·i of each tile.
const PARTS: u32 = THREADS / ROWS;
// Head dims of a subgroup's outputs: the subgroups of a tile's keys also cover every head dim.
const OUTPUT_DIMS: u32 = 8u * BLOCK;
const_assert KEYS / (2u * BLOCK) * OUTPUT_DIMS == MAX_DIM;
const_assert FETCHES * THREADS == ROWS * ROW_WORDS;
const_assert VALUE_FETCHES * THREADS == BLOCK * VALUE_ROW_WORDS;
const_assert PARTS * ROWS == THREADS;
const_assert SUBGROUPS * BLOCK * BLOCK <= ROWS * SCORE_STRIDE;
// Below any score; masked keys never reach exp2.
const NEG_HUGE: f32 = -3.0e38;

var<workgroup> q_tile: array<f16, ROWS * TILE_STRIDE>;
// A slice of head dims of KEYS keys for the scores, then every head dim of BLOCK values (the
// tile holds both: BLOCK · VALUE_STRIDE ≤ KEYS · TILE_STRIDE).
var<workgroup> kv_tile: array<f16, KEYS * TILE_STRIDE>;
var<workgroup> weights: array<f16, ROWS * TILE_STRIDE>;
// A tile's scores; at the end the subgroups' staging blocks.
var<workgroup> scores: array<f32, ROWS * SCORE_STRIDE>;
var<workgroup> partial: array<f32, THREADS>;
var<workgroup> row_max: array<f32, ROWS>;
var<workgroup> row_sum: array<f32, ROWS>;

// What a workgroup works on: its kv head, first token, and live rows (token, q head).
struct Block {
    kvh: u32,
    group: u32,
    first_token: u32,
    live_rows: u32,
}

// Head dims d0..d0+DEPTH of the block's q rows into q_tile (zeros past the live rows).
fn load_queries(b: Block, d0: u32, lid: u32) {
    let row_words = p.padded_dim / 2u;
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        let r = i / ROW_WORDS;
        let w = i % ROW_WORDS;
        var word = 0u;
        if (r < b.live_rows) {
            let t = b.first_token + r / b.group;
            let h = b.kvh * b.group + r % b.group;
            word = q16[(h * p.rows + t) * row_words + d0 / 2u + w];
        }
        // Exact: f16 → f32 → f16.
        let halves = vec2<f16>(unpack2x16float(word));
        q_tile[r * TILE_STRIDE + 2u * w] = halves.x;
        q_tile[r * TILE_STRIDE + 2u * w + 1u] = halves.y;
    }
}

// Head dims d0..d0+DEPTH of keys k0..k0+KEYS into kv_tile.
fn load_keys(b: Block, k0: u32, d0: u32, lid: u32) {
    let row_words = p.padded_dim / 2u;
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        let key = i / ROW_WORDS;
        let w = i % ROW_WORDS;
        let word = k16[(b.kvh * p.padded_keys + k0 + key) * row_words + d0 / 2u + w];
        let halves = vec2<f16>(unpack2x16float(word));
        kv_tile[key * TILE_STRIDE + 2u * w] = halves.x;
        kv_tile[key * TILE_STRIDE + 2u * w + 1u] = halves.y;
    }
}

// Every head dim of values k0..k0+BLOCK into kv_tile (zeros past the padded head dim).
fn load_values(b: Block, k0: u32, lid: u32) {
    let row_words = p.padded_dim / 2u;
    for (var j = 0u; j < VALUE_FETCHES; j++) {
        let i = lid + j * THREADS;
        let key = i / VALUE_ROW_WORDS;
        let w = i % VALUE_ROW_WORDS;
        var word = 0u;
        if (w < row_words) {
            word = v16[(b.kvh * p.padded_keys + k0 + key) * row_words + w];
        }
        let halves = vec2<f16>(unpack2x16float(word));
        kv_tile[key * VALUE_STRIDE + 2u * w] = halves.x;
        kv_tile[key * VALUE_STRIDE + 2u * w + 1u] = halves.y;
    }
}

// Whether row r of the block sees key j.
fn sees(b: Block, r: u32, j: u32) -> bool {
    return r < b.live_rows && j <= p.pos0 + b.first_token + r / b.group;
}

// Row r's PARTS values of `partial` combined: the largest, or the sum.
fn combine_partial(r: u32, largest: bool) -> f32 {
    var acc = partial[r * PARTS];
    for (var i = 1u; i < PARTS; i++) {
        let x = partial[r * PARTS + i];
        acc = select(acc + x, max(acc, x), largest);
    }
    return acc;
}

// Writes the subgroup's staged output block (its first row and head dim) where it exists.
// Every invocation of the workgroup calls this together.
fn write_staged(b: Block, row: u32, dim: u32, live: bool, sg_id: u32, sg_lane: u32) {
    workgroupBarrier();
    let base = sg_id * BLOCK * BLOCK;
    for (var e = sg_lane; e < BLOCK * BLOCK; e += SUBGROUP_SIZE) {
        let r = row + e / BLOCK;
        let d = dim + e % BLOCK;
        if (live && r < b.live_rows && d < p.head_dim) {
            let t = b.first_token + r / b.group;
            let h = b.kvh * b.group + r % b.group;
            var o = scores[base + e] / row_sum[r];
            if (p.gated != 0u) {
                let gate = gate_src[((t * p.n_head + h) * 2u + 1u) * p.head_dim + d];
                o *= 1.0 / (1.0 + exp(-gate));
            }
            out[(t * p.n_head + h) * p.head_dim + d] = o;
        }
    }
    // The staging block is rewritten by the next call.
    workgroupBarrier();
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
) {
    // Workgroups of a folded grid past the last block redo the last one and store nothing:
    // cooperative operations may not follow a return.
    let id = workgroup_index(wid, nwg);
    let live = id < p.workgroups;
    let block = min(id, p.workgroups - 1u);
    var b: Block;
    b.kvh = block % p.n_kv_head;
    b.group = p.n_head / p.n_kv_head;
    b.first_token = (block / p.n_kv_head) * p.tokens_per_block;
    let tokens = min(p.tokens_per_block, p.rows - b.first_token);
    b.live_rows = tokens * b.group;
    let last_key = p.pos0 + b.first_token + tokens - 1u;

    let row0 = (sg_id % (ROWS / BLOCK)) * BLOCK;
    let col0 = (sg_id / (ROWS / BLOCK)) * 2u * BLOCK;
    let a_at = row0 * TILE_STRIDE;
    let my_row = lid / PARTS;
    let my_part = lid % PARTS;
    // o<i>: rows row0.., dims dim0 + BLOCK·i...
    let dim0 = (sg_id / (ROWS / BLOCK)) * OUTPUT_DIMS;
    var o0 = BlockC();
    var o1 = BlockC();
    var o2 = BlockC();
    var o3 = BlockC();
    var o4 = BlockC();
    var o5 = BlockC();
    var o6 = BlockC();
    var o7 = BlockC();
    var largest = NEG_HUGE;
    var total = 0.0;
    for (var sweep = 0u; sweep < 2u; sweep++) {
        for (var k0 = 0u; k0 <= last_key; k0 += KEYS) {
            var s0 = BlockC();
            var s1 = BlockC();
            for (var d0 = 0u; d0 < p.padded_dim; d0 += DEPTH) {
                // The tiles are free again: the last slice's (or the last tile's values')
                // products are done.
                workgroupBarrier();
                load_queries(b, d0, lid);
                load_keys(b, k0, d0, lid);
                workgroupBarrier();
                for (var k = 0u; k < DEPTH; k += BLOCK) {
                    let a = coopLoadT<BlockA>(&q_tile[a_at + k], TILE_STRIDE);
                    let b0 = coopLoad<BlockB>(
                        &kv_tile[col0 * TILE_STRIDE + k],
                        TILE_STRIDE,
                    );
                    let b1 = coopLoad<BlockB>(
                        &kv_tile[(col0 + BLOCK) * TILE_STRIDE + k],
                        TILE_STRIDE,
                    );
                    s0 = coopMultiplyAdd(a, b0, s0);
                    s1 = coopMultiplyAdd(a, b1, s1);
                }
            }
            coopStoreT(s0, &scores[row0 * SCORE_STRIDE + col0], SCORE_STRIDE);
            coopStoreT(s1, &scores[row0 * SCORE_STRIDE + col0 + BLOCK], SCORE_STRIDE);
            workgroupBarrier();
            if (sweep == 0u) {
                for (var i = 0u; i < KEYS / PARTS; i++) {
                    let key = my_part + PARTS * i;
                    if (sees(b, my_row, k0 + key)) {
                        largest = max(largest, scores[my_row * SCORE_STRIDE + key]);
                    }
                }
                continue;
            }
            let top = row_max[my_row];
            for (var i = 0u; i < KEYS / PARTS; i++) {
                let key = my_part + PARTS * i;
                var w = 0.0;
                if (sees(b, my_row, k0 + key)) {
                    w = exp2(scores[my_row * SCORE_STRIDE + key] - top);
                }
                total += w;
                weights[my_row * TILE_STRIDE + key] = f16(w);
            }
            for (var kk = 0u; kk < KEYS; kk += BLOCK) {
                // The weights are complete, and the last values are multiplied.
                workgroupBarrier();
                load_values(b, k0 + kk, lid);
                workgroupBarrier();
                let a = coopLoadT<BlockA>(&weights[a_at + kk], TILE_STRIDE);
                let v0 = coopLoadT<BlockB>(
                    &kv_tile[dim0],
                    VALUE_STRIDE,
                );
                o0 = coopMultiplyAdd(a, v0, o0);
                let v1 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + BLOCK],
                    VALUE_STRIDE,
                );
                o1 = coopMultiplyAdd(a, v1, o1);
                let v2 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + 2u * BLOCK],
                    VALUE_STRIDE,
                );
                o2 = coopMultiplyAdd(a, v2, o2);
                let v3 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + 3u * BLOCK],
                    VALUE_STRIDE,
                );
                o3 = coopMultiplyAdd(a, v3, o3);
                let v4 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + 4u * BLOCK],
                    VALUE_STRIDE,
                );
                o4 = coopMultiplyAdd(a, v4, o4);
                let v5 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + 5u * BLOCK],
                    VALUE_STRIDE,
                );
                o5 = coopMultiplyAdd(a, v5, o5);
                let v6 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + 6u * BLOCK],
                    VALUE_STRIDE,
                );
                o6 = coopMultiplyAdd(a, v6, o6);
                let v7 = coopLoadT<BlockB>(
                    &kv_tile[dim0 + 7u * BLOCK],
                    VALUE_STRIDE,
                );
                o7 = coopMultiplyAdd(a, v7, o7);
            }
        }
        if (sweep == 0u) {
            partial[lid] = largest;
            workgroupBarrier();
            if (lid < ROWS) {
                row_max[lid] = combine_partial(lid, true);
            }
        }
    }
    partial[lid] = total;
    workgroupBarrier();
    if (lid < ROWS) {
        row_sum[lid] = combine_partial(lid, false);
    }

    let mine = sg_id * BLOCK * BLOCK;
    coopStoreT(o0, &scores[mine], BLOCK);
    write_staged(b, row0, dim0, live, sg_id, sg_lane);
    coopStoreT(o1, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + BLOCK, live, sg_id, sg_lane);
    coopStoreT(o2, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + 2u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(o3, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + 3u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(o4, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + 4u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(o5, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + 5u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(o6, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + 6u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(o7, &scores[mine], BLOCK);
    write_staged(b, row0, dim0 + 7u * BLOCK, live, sg_id, sg_lane);
}
