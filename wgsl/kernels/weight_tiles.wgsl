// The cooperative GEMM's weight tiles as its quantized tile decoders (gemm_coop_weights_*.wgsl,
// composed with this file) leave them in workgroup memory, written out row by row: the f16
// scratch matrix half_weights_*.wgsl would write for the same rows, so that the two are compared
// bit for bit where the GEMM itself cannot run (no cooperative matrices, e.g. lavapipe). One
// workgroup per tile of TILE weight rows × DEPTH columns; `p.tiles` is their number.

@group(0) @binding(2) var<storage, read_write> halves: array<u32>;

var<workgroup> w_tile: array<u32, TILE * TILE_STRIDE / 2u>;

fn store_weight_word(at: u32, word: u32) {
    w_tile[at / 2u] = word;
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let tile = workgroup_index(wid, nwg);
    if (tile >= p.tiles) {
        return;
    }
    let steps = p.padded_cols / DEPTH;
    let first_row = tile / steps * TILE;
    let k0 = tile % steps * DEPTH;
    fetch_weights(first_row, k0, lid);
    store_weights(lid);
    workgroupBarrier();
    for (var i = lid; i < TILE * ROW_WORDS; i += THREADS) {
        let row = i / ROW_WORDS;
        let word = i % ROW_WORDS;
        halves[((first_row + row) * p.padded_cols + k0) / 2u + word] = w_tile[row * TILE_STRIDE / 2u + word];
    }
}
