// The prefill GEMM of gemm_coop.wgsl (same f16 scratch matrices, same result) laid out for
// throughput, chosen by GpuOptions::gemm_tile: TOKEN_TILE tokens × ROW_TILE weight rows per
// workgroup (defined ahead of this file, one pipeline per tile shape), each subgroup of 32
// invocations owning 32 tokens × 64 rows of it as 2 × 4 blocks of 16 × 16 with f32 accumulators:
//   A = x block (tokens × depth, row-major in the x part of a buffer),
//   B = Wᵀ block (depth × rows: the weight rows read column-major),
//   C += A·B.
// DEPTH columns a step go through two buffers of workgroup memory: the next step's columns are
// fetched into registers before the current step's products and stored into the other buffer
// after them, so one barrier a step separates the buffers' uses. The halves move as they are,
// without conversions: fetched as vec4<f16>, stored as pairs (one word a store; cooperative
// loads take a pair pointer, offset and stride in pairs, as llama.cpp's Vulkan GEMM does). Rows
// are TILE_STRIDE pairs apart (80 bytes): the eight 16-byte rows of a cooperative load fall in
// distinct banks, and a lane storing its four pairs starts at the one of its place in the row,
// so that the subgroup's stores at each turn fall in 32 different banks. Tiles wholly inside
// the output are stored straight into it; edge tiles through gemm_coop_output.wgsl.

const SUBGROUP_SIZE: u32 = 32u;
const BLOCK: u32 = 16u;
const SUBGROUP_TOKENS: u32 = 2u * BLOCK;
const SUBGROUP_ROWS: u32 = 4u * BLOCK;
// Subgroups along the tokens of the tile (the rest go along its rows).
const TOKEN_GROUPS: u32 = TOKEN_TILE / SUBGROUP_TOKENS;
const THREADS: u32 = TOKEN_GROUPS * (ROW_TILE / SUBGROUP_ROWS) * SUBGROUP_SIZE;
// Token tiles per group of the order tiles go in (see main).
const GROUP_TOKEN_TILES: u32 = 8u;
const DEPTH: u32 = 32u;
// Pairs of halves (vec2<f16>) from one tile row to the next: DEPTH halves and 8 of padding.
const TILE_STRIDE: u32 = DEPTH / 2u + 4u;
// 16-byte pieces (four pairs) of a tile row, and of each matrix's tile each invocation fetches.
const ROW_PIECES: u32 = DEPTH / 8u;
const X_FETCHES: u32 = TOKEN_TILE * ROW_PIECES / THREADS;
const W_FETCHES: u32 = ROW_TILE * ROW_PIECES / THREADS;
// Pairs of the x part of a buffer (the weight part follows it), and of a buffer.
const X_PAIRS: u32 = TOKEN_TILE * TILE_STRIDE;
const BUFFER: u32 = (TOKEN_TILE + ROW_TILE) * TILE_STRIDE;

const_assert TOKEN_TILE % SUBGROUP_TOKENS == 0u && ROW_TILE % SUBGROUP_ROWS == 0u;
const_assert X_FETCHES * THREADS == TOKEN_TILE * ROW_PIECES;
const_assert W_FETCHES * THREADS == ROW_TILE * ROW_PIECES;

// Four halves an element: a piece is two.
@group(0) @binding(1) var<storage, read> x16: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> w16: array<vec4<f16>>;

var<workgroup> tiles: array<vec2<f16>, 2u * BUFFER>;
// Piece j of a matrix's fetch: elements 2j (its first four halves) and 2j + 1.
var<private> x_fetched: array<vec4<f16>, 2u * X_FETCHES>;
var<private> w_fetched: array<vec4<f16>, 2u * W_FETCHES>;

// Columns step·DEPTH.. of the tile's x rows and weight rows into registers. The scratch
// matrices hold whole tiles of TOKEN_TILE and ROW_TILE (both divide 128, their padding) and
// whole steps of columns, so no fetch needs a bounds check.
fn fetch(first_token: u32, first_row: u32, step: u32, lid: u32) {
    let row_quads = p.padded_cols / 4u;
    let k = step * (DEPTH / 4u);
    for (var j = 0u; j < X_FETCHES; j++) {
        let i = lid + j * THREADS;
        let at = (first_token + i / ROW_PIECES) * row_quads + k + 2u * (i % ROW_PIECES);
        x_fetched[2u * j] = x16[at];
        x_fetched[2u * j + 1u] = x16[at + 1u];
    }
    for (var j = 0u; j < W_FETCHES; j++) {
        let i = lid + j * THREADS;
        let at = (first_row + i / ROW_PIECES) * row_quads + k + 2u * (i % ROW_PIECES);
        w_fetched[2u * j] = w16[at];
        w_fetched[2u * j + 1u] = w16[at + 1u];
    }
}

// The four pairs of piece `piece` of a tile row (low: the first two, high: the last two), its
// first pair at `at` in `tiles`. Lanes with consecutive pieces of eight consecutive rows start
// at different pairs: with rows 20 words apart, row·20 + 4·piece + (turn + piece) % 4 takes 32
// distinct values mod 32 at each turn.
fn store_piece(at: u32, piece: u32, low: vec4<f16>, high: vec4<f16>) {
    for (var turn = 0u; turn < 4u; turn++) {
        let pair = (turn + piece) % 4u;
        let quad = select(low, high, pair >= 2u);
        tiles[at + pair] = select(quad.xy, quad.zw, pair % 2u == 1u);
    }
}

// The fetched columns into buffer `buffer`.
fn store_fetched(buffer: u32, lid: u32) {
    let x_at = buffer * BUFFER;
    let w_at = x_at + X_PAIRS;
    for (var j = 0u; j < X_FETCHES; j++) {
        let i = lid + j * THREADS;
        let piece = i % ROW_PIECES;
        let at = x_at + i / ROW_PIECES * TILE_STRIDE + 4u * piece;
        store_piece(at, piece, x_fetched[2u * j], x_fetched[2u * j + 1u]);
    }
    for (var j = 0u; j < W_FETCHES; j++) {
        let i = lid + j * THREADS;
        let piece = i % ROW_PIECES;
        let at = w_at + i / ROW_PIECES * TILE_STRIDE + 4u * piece;
        store_piece(at, piece, w_fetched[2u * j], w_fetched[2u * j + 1u]);
    }
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
    // Tiles go by groups of GROUP_TOKEN_TILES token tiles (the last group takes what is left),
    // token tiles fastest within a group: the workgroups resident together then share each
    // weight tile among up to GROUP_TOKEN_TILES of them, so L2 serves most weight reads.
    let token_tiles = p.tiles / p.row_tiles;
    let group_tiles = GROUP_TOKEN_TILES * p.row_tiles;
    let group_first = tile / group_tiles * GROUP_TOKEN_TILES;
    let group_width = min(GROUP_TOKEN_TILES, token_tiles - group_first);
    let in_group = tile % group_tiles;
    let first_row = in_group / group_width * ROW_TILE;
    let first_token = (group_first + in_group % group_width) * TOKEN_TILE;
    let token = (sg_id % TOKEN_GROUPS) * SUBGROUP_TOKENS;
    let row = (sg_id / TOKEN_GROUPS) * SUBGROUP_ROWS;
    let a_at = token * TILE_STRIDE;
    let b_at = X_PAIRS + row * TILE_STRIDE;
    let next = BLOCK * TILE_STRIDE;
    // c<i><j>: tokens token + 16i.., rows row + 16j...
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c02 = coop_mat16x16<f32, C>();
    var c03 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    var c12 = coop_mat16x16<f32, C>();
    var c13 = coop_mat16x16<f32, C>();
    let steps = p.padded_cols / DEPTH;
    fetch(first_token, first_row, 0u, lid);
    store_fetched(0u, lid);
    workgroupBarrier();
    for (var step = 0u; step < steps; step++) {
        let more = step + 1u < steps;
        if (more) {
            fetch(first_token, first_row, step + 1u, lid);
        }
        let base = (step % 2u) * BUFFER;
        // k: the first pair of the 16 columns.
        for (var k = 0u; k < DEPTH / 2u; k += BLOCK / 2u) {
            let a = base + a_at + k;
            let b = base + b_at + k;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&tiles[a], TILE_STRIDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&tiles[a + next], TILE_STRIDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&tiles[b], TILE_STRIDE);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c10 = coopMultiplyAdd(a1, b0, c10);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&tiles[b + next], TILE_STRIDE);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c11 = coopMultiplyAdd(a1, b1, c11);
            let b2 = coopLoad<coop_mat16x16<f16, B>>(&tiles[b + 2u * next], TILE_STRIDE);
            c02 = coopMultiplyAdd(a0, b2, c02);
            c12 = coopMultiplyAdd(a1, b2, c12);
            let b3 = coopLoad<coop_mat16x16<f16, B>>(&tiles[b + 3u * next], TILE_STRIDE);
            c03 = coopMultiplyAdd(a0, b3, c03);
            c13 = coopMultiplyAdd(a1, b3, c13);
        }
        // The other buffer was last read in the step before, ended by its barrier; this step's
        // barrier ends the reads of this buffer and completes the other before it is read.
        if (more) {
            store_fetched((step + 1u) % 2u, lid);
        }
        workgroupBarrier();
    }
    let t0 = first_token + token;
    let r0 = first_row + row;
    // Cooperative stores to memory want rows 16-byte aligned.
    let inside = live
        && first_token + TOKEN_TILE <= p.tokens
        && first_row + ROW_TILE <= p.rows
        && p.out_cols % 4u == 0u
        && p.out_offset % 4u == 0u;
    if (inside) {
        let stride = p.out_cols;
        let at = t0 * stride + p.out_offset + r0;
        let down = BLOCK * stride;
        // Each index a let: naga 30 writes no SPIR-V for one computed in a store's arguments.
        let at01 = at + BLOCK;
        let at02 = at + 2u * BLOCK;
        let at03 = at + 3u * BLOCK;
        let at10 = at + down;
        let at11 = at10 + BLOCK;
        let at12 = at10 + 2u * BLOCK;
        let at13 = at10 + 3u * BLOCK;
        coopStoreT(c00, &y[at], stride);
        coopStoreT(c01, &y[at01], stride);
        coopStoreT(c02, &y[at02], stride);
        coopStoreT(c03, &y[at03], stride);
        coopStoreT(c10, &y[at10], stride);
        coopStoreT(c11, &y[at11], stride);
        coopStoreT(c12, &y[at12], stride);
        coopStoreT(c13, &y[at13], stride);
    } else {
        let mine = sg_id * BLOCK * BLOCK;
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
}
