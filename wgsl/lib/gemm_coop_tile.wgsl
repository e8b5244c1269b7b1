// What the GEMMs on cooperative matrices (gemm_coop*.wgsl) share: the parameters, the output,
// the tile each workgroup computes (TILE tokens × TILE weight rows, each subgroup 2 × 4 blocks
// of BLOCK × BLOCK: 2·BLOCK tokens × 4·BLOCK rows, so as many subgroups as cover the tile), and
// the writing of a subgroup's eight f32 blocks through a staging block of its own, so that edge
// tiles write only what exists.

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
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const TILE: u32 = 128u;
const SUBGROUP_TOKENS: u32 = 2u * BLOCK;
const SUBGROUP_ROWS: u32 = 4u * BLOCK;
const SUBGROUPS: u32 = (TILE / SUBGROUP_TOKENS) * (TILE / SUBGROUP_ROWS);
const THREADS: u32 = SUBGROUPS * SUBGROUP_SIZE;

var<workgroup> staging: array<f32, SUBGROUPS * BLOCK * BLOCK>;

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

// The subgroup's blocks c<i><j> (tokens t0 + BLOCK·i.., rows r0 + BLOCK·j..) into y.
fn write_blocks(
    t0: u32, r0: u32, live: bool, sg_id: u32, sg_lane: u32,
    c00: BlockC, c01: BlockC, c02: BlockC, c03: BlockC,
    c10: BlockC, c11: BlockC, c12: BlockC, c13: BlockC,
) {
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
