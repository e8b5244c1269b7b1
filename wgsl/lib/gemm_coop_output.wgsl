// The parameters, the output and its staging for the GEMMs on cooperative matrices
// (gemm_coop.wgsl, gemm_coop_blocked.wgsl): each subgroup stores one 16 × 16 block of f32 sums
// at a time into its staging block, and the workgroup writes the blocks out where they exist,
// so that edge tiles write only the tokens and weight rows there are. The kernel defines
// THREADS, SUBGROUP_SIZE and BLOCK and binds x16 and w16 at 1 and 2.

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

var<workgroup> staging: array<f32, THREADS / SUBGROUP_SIZE * BLOCK * BLOCK>;

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
