// The tiles of the cooperative GEMM (gemm_coop.wgsl), shared with the files that fill its weight
// tile (gemm_coop_weights_*.wgsl) and the kernel that writes those tiles out for tests
// (weight_tiles.wgsl): TILE weight rows (and tokens) per workgroup of THREADS invocations, DEPTH
// columns a step. The kernel file defines `store_weight_word`, which puts a word of two halves
// into the weight tile at a half's index.

struct Params {
    rows: u32,
    tokens: u32,
    padded_cols: u32,
    out_cols: u32,
    out_offset: u32,
    row_tiles: u32,
    tiles: u32,
    // Bytes of a weight row in the bound weight buffer (the quantized tile decoders').
    row_bytes: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;

const THREADS: u32 = 256u;
const TILE: u32 = 128u;
const DEPTH: u32 = 64u;
// Eight halves of padding keep every tile row 16-byte aligned, as cooperative loads require, and
// put consecutive rows four banks apart.
const TILE_STRIDE: u32 = DEPTH + 8u;
// Words (two halves each) of a tile row, and of one matrix's tile each invocation fetches.
const ROW_WORDS: u32 = DEPTH / 2u;
const FETCHES: u32 = TILE * ROW_WORDS / THREADS;

// Eight halves (four words) into the weight tile from the half at `at` on, by an invocation of
// the quantized tile decoders, which give each tile row two invocations (lid % 2 its half) and
// store runs at the same place in every row together. A subgroup's 32 invocations then write 16
// rows, whose words fall 4 banks apart (TILE_STRIDE) and so on 8 different banks only: each
// shared by the two halves of a row and of the row 8 further. Those four start at different
// words of their runs, so that each store of the subgroup hits 32 different banks.
fn store_weight_quad(at: u32, words: vec4<u32>, lid: u32) {
    let first = lid % 32u / 16u + 2u * (lid % 2u);
    for (var i = 0u; i < 4u; i++) {
        let j = (first + i) % 4u;
        store_weight_word(at + 2u * j, words[j]);
    }
}
