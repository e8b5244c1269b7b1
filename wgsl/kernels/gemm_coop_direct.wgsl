// GEMM on cooperative matrices (tensor cores) as gemm_coop.wgsl computes it, the same tiles and
// subgroup blocks, but each subgroup loads its blocks straight from the f16 scratch matrices
// (through the cache the workgroup's subgroups share) instead of staging the tile in workgroup
// memory: no stores of halves, no barriers in the loop (to compare: --gemm-direct-loads).

@group(0) @binding(1) var<storage, read> x16: array<f16>;
@group(0) @binding(2) var<storage, read> w16: array<f16>;

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
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
    let stride = p.padded_cols;
    let a_at = (first_token + token) * stride;
    let b_at = (first_row + row) * stride;
    let next = BLOCK * stride;
    var c00 = BlockC();
    var c01 = BlockC();
    var c02 = BlockC();
    var c03 = BlockC();
    var c10 = BlockC();
    var c11 = BlockC();
    var c12 = BlockC();
    var c13 = BlockC();
    for (var k = 0u; k < p.padded_cols; k += BLOCK) {
        let a0 = coopLoadT<BlockA>(&x16[a_at + k], stride);
        let a1 = coopLoadT<BlockA>(&x16[a_at + next + k], stride);
        let b0 = coopLoad<BlockB>(&w16[b_at + k], stride);
        c00 = coopMultiplyAdd(a0, b0, c00);
        c10 = coopMultiplyAdd(a1, b0, c10);
        let b1 = coopLoad<BlockB>(&w16[b_at + next + k], stride);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c11 = coopMultiplyAdd(a1, b1, c11);
        let b2 = coopLoad<BlockB>(&w16[b_at + 2u * next + k], stride);
        c02 = coopMultiplyAdd(a0, b2, c02);
        c12 = coopMultiplyAdd(a1, b2, c12);
        let b3 = coopLoad<BlockB>(&w16[b_at + 3u * next + k], stride);
        c03 = coopMultiplyAdd(a0, b3, c03);
        c13 = coopMultiplyAdd(a1, b3, c13);
    }
    write_blocks(first_token + token, first_row + row, live, sg_id, sg_lane,
        c00, c01, c02, c03, c10, c11, c12, c13);
}
