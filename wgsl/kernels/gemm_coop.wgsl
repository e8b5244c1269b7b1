// GEMM on cooperative matrices (tensor cores) for many tokens at once (prefill), over the f16
// scratch matrices of half_activations.wgsl (x) and half_weights.wgsl (a chunk of weight rows):
// y[t, out_offset + r] = Σ_c W[r, c]·x[t, c]. Both are padded with zeros to whole tiles, so
// tiles are copied without bounds checks: 128 tokens × 128 weight rows per workgroup, DEPTH
// columns a step, through workgroup memory. Each subgroup owns 2 × 4 blocks of BLOCK × BLOCK
// of the output tile (2·BLOCK tokens × 4·BLOCK rows) with f32 accumulators, and the workgroup
// has as many subgroups as cover the tile (the host gives BLOCK and SUBGROUP_SIZE: 8 subgroups
// of 32 with 16 × 16 blocks on tensor cores, 32 of 8 with 8 × 8 blocks on lavapipe):
//   A = x block (tokens × depth, row-major in x_tile),
//   B = Wᵀ block (depth × rows: the rows of w_tile read column-major),
//   C += A·B.
// The next step's columns are fetched into registers before the current step's products, so
// that their latency hides behind the tensor cores. A subgroup of 32 fetches and stores one whole
// tile row at a time (a word, two halves, a lane), which keeps the workgroup-memory stores free of
// bank conflicts. Results go out through a per-subgroup staging block, so that edge tiles write
// only what exists.

struct Params {
    rows: u32,
    tokens: u32,
    padded_cols: u32,
    out_cols: u32,
    out_offset: u32,
    row_tiles: u32,
    tiles: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x16: array<u32>;
@group(0) @binding(2) var<storage, read> w16: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const TILE: u32 = 128u;
const DEPTH: u32 = 64u;
const SUBGROUP_TOKENS: u32 = 2u * BLOCK;
const SUBGROUP_ROWS: u32 = 4u * BLOCK;
const SUBGROUPS: u32 = (TILE / SUBGROUP_TOKENS) * (TILE / SUBGROUP_ROWS);
const THREADS: u32 = SUBGROUPS * SUBGROUP_SIZE;
// Eight halves of padding keep every tile row 16-byte aligned, as cooperative loads require, and
// put consecutive rows four banks apart.
const TILE_STRIDE: u32 = DEPTH + 8u;
// Words (two halves each) of a tile row, and of one matrix's tile each invocation fetches.
const ROW_WORDS: u32 = DEPTH / 2u;
const FETCHES: u32 = TILE * ROW_WORDS / THREADS;
const_assert FETCHES * THREADS == TILE * ROW_WORDS;

var<workgroup> x_tile: array<f16, TILE * TILE_STRIDE>;
var<workgroup> w_tile: array<f16, TILE * TILE_STRIDE>;
var<workgroup> staging: array<f32, SUBGROUPS * BLOCK * BLOCK>;
var<private> x_fetched: array<u32, FETCHES>;
var<private> w_fetched: array<u32, FETCHES>;

// Columns k0..k0+DEPTH of the tile's x rows and weight rows into registers.
fn fetch(first_row: u32, first_token: u32, k0: u32, lid: u32) {
    let row_words = p.padded_cols / 2u;
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        let at = i / ROW_WORDS * row_words + k0 / 2u + i % ROW_WORDS;
        x_fetched[j] = x16[first_token * row_words + at];
        w_fetched[j] = w16[first_row * row_words + at];
    }
}

// The fetched columns into workgroup memory.
fn store_fetched(lid: u32) {
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        let at = i / ROW_WORDS * TILE_STRIDE + 2u * (i % ROW_WORDS);
        // Exact: f16 → f32 → f16.
        let xs = vec2<f16>(unpack2x16float(x_fetched[j]));
        let ws = vec2<f16>(unpack2x16float(w_fetched[j]));
        x_tile[at] = xs.x;
        x_tile[at + 1u] = xs.y;
        w_tile[at] = ws.x;
        w_tile[at + 1u] = ws.y;
    }
}

// Writes the subgroup's staged block (token, row: its first token and weight row) where it
// exists. Every invocation of the workgroup calls this together.
fn write_staged(token: u32, row: u32, live: bool, sg_id: u32, sg_lane: u32) {
    workgroupBarrier();
    let base = sg_id * BLOCK * BLOCK;
    for (var e = sg_lane; e < BLOCK * BLOCK; e += SUBGROUP_SIZE) {
        let t = token + e / BLOCK;
        let r = row + e % BLOCK;
        if (live && t < p.tokens && r < p.rows) {
            y[t * p.out_cols + p.out_offset + r] = staging[base + e];
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
    // Workgroups of a folded grid past the last tile redo the last one and store nothing:
    // cooperative operations may not follow a return.
    let id = workgroup_index(wid, nwg);
    let live = id < p.tiles;
    let tile = min(id, p.tiles - 1u);
    let first_row = (tile % p.row_tiles) * TILE;
    let first_token = (tile / p.row_tiles) * TILE;
    let token = (sg_id % (TILE / SUBGROUP_TOKENS)) * SUBGROUP_TOKENS;
    let row = (sg_id / (TILE / SUBGROUP_TOKENS)) * SUBGROUP_ROWS;
    let a_at = token * TILE_STRIDE;
    let b_at = row * TILE_STRIDE;
    let next = BLOCK * TILE_STRIDE;
    // c<i><j>: tokens token + BLOCK·i.., rows row + BLOCK·j...
    var c00 = BlockC();
    var c01 = BlockC();
    var c02 = BlockC();
    var c03 = BlockC();
    var c10 = BlockC();
    var c11 = BlockC();
    var c12 = BlockC();
    var c13 = BlockC();
    fetch(first_row, first_token, 0u, lid);
    store_fetched(lid);
    workgroupBarrier();
    for (var k0 = 0u; k0 < p.padded_cols; k0 += DEPTH) {
        let more = k0 + DEPTH < p.padded_cols;
        if (more) {
            fetch(first_row, first_token, k0 + DEPTH, lid);
        }
        for (var k = 0u; k < DEPTH; k += BLOCK) {
            let a0 = coopLoadT<BlockA>(&x_tile[a_at + k], TILE_STRIDE);
            let a1 = coopLoadT<BlockA>(&x_tile[a_at + next + k], TILE_STRIDE);
            let b0 = coopLoad<BlockB>(&w_tile[b_at + k], TILE_STRIDE);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c10 = coopMultiplyAdd(a1, b0, c10);
            let b1 = coopLoad<BlockB>(&w_tile[b_at + next + k], TILE_STRIDE);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c11 = coopMultiplyAdd(a1, b1, c11);
            let b2 = coopLoad<BlockB>(&w_tile[b_at + 2u * next + k], TILE_STRIDE);
            c02 = coopMultiplyAdd(a0, b2, c02);
            c12 = coopMultiplyAdd(a1, b2, c12);
            let b3 = coopLoad<BlockB>(&w_tile[b_at + 3u * next + k], TILE_STRIDE);
            c03 = coopMultiplyAdd(a0, b3, c03);
            c13 = coopMultiplyAdd(a1, b3, c13);
        }
        // Every subgroup is done with the tiles before they are overwritten, and the new ones
        // are complete before the next step reads them.
        workgroupBarrier();
        if (more) {
            store_fetched(lid);
        }
        workgroupBarrier();
    }
    let mine = sg_id * BLOCK * BLOCK;
    let t0 = first_token + token;
    let r0 = first_row + row;
    coopStoreT(c00, &staging[mine], BLOCK);
    write_staged(t0, r0, live, sg_id, sg_lane);
    coopStoreT(c01, &staging[mine], BLOCK);
    write_staged(t0, r0 + BLOCK, live, sg_id, sg_lane);
    coopStoreT(c02, &staging[mine], BLOCK);
    write_staged(t0, r0 + 2u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(c03, &staging[mine], BLOCK);
    write_staged(t0, r0 + 3u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(c10, &staging[mine], BLOCK);
    write_staged(t0 + BLOCK, r0, live, sg_id, sg_lane);
    coopStoreT(c11, &staging[mine], BLOCK);
    write_staged(t0 + BLOCK, r0 + BLOCK, live, sg_id, sg_lane);
    coopStoreT(c12, &staging[mine], BLOCK);
    write_staged(t0 + BLOCK, r0 + 2u * BLOCK, live, sg_id, sg_lane);
    coopStoreT(c13, &staging[mine], BLOCK);
    write_staged(t0 + BLOCK, r0 + 3u * BLOCK, live, sg_id, sg_lane);
}
