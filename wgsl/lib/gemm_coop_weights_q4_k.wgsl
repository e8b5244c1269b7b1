// The cooperative GEMM's weight tile decoded from Q4_K rows as it is staged, with no f16
// scratch matrix. A step's DEPTH = 64 columns are sub-blocks 2c and 2c+1 of a super-block,
// the low and high nibbles of the same 32 bytes: each of the two invocations of a tile row
// fetches the block's 16-byte header and one 16-byte half of those bytes (the pair reads 48
// neighbouring bytes), and decodes 16 columns of each sub-block, as half_weights_q4_k.wgsl does.
// The rows are whole super-blocks (144 = 9·16 bytes); rows past `p.rows` decode to zeros.

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;

// Two invocations a tile row.
const_assert THREADS == 2u * TILE;

var<private> w_head: vec4<u32>;
var<private> w_nibbles: vec4<u32>;
// c of the fetched sub-blocks 2c, 2c+1.
var<private> w_pair: u32;
var<private> w_live: bool;

// Columns k0..k0+DEPTH of the tile's weight rows into registers, still packed.
fn fetch_weights(first_row: u32, k0: u32, lid: u32) {
    let row = first_row + lid / 2u;
    w_pair = k0 % 256u / 64u;
    w_live = row < p.rows;
    if (w_live) {
        let v = row * p.row_bytes / 16u + k0 / 256u * 9u;
        w_head = w[v];
        w_nibbles = w[v + 1u + 2u * w_pair + lid % 2u];
    }
}

// The fetched columns decoded into the weight tile: sub-block 2c is the step's first 32
// columns, 2c+1 its last.
fn store_weights(lid: u32) {
    var runs = array<vec4<u32>, 4>();
    if (w_live) {
        let f = q4_k_span_factors(w_head, w_pair);
        let q = w_nibbles;
        runs[0] = q4_k_eight_halves(f.x, f.z, q.x, q.y);
        runs[1] = q4_k_eight_halves(f.x, f.z, q.z, q.w);
        runs[2] = q4_k_eight_halves(f.y, f.w, q.x >> 4u, q.y >> 4u);
        runs[3] = q4_k_eight_halves(f.y, f.w, q.z >> 4u, q.w >> 4u);
    }
    let at = lid / 2u * TILE_STRIDE + 16u * (lid % 2u);
    store_weight_quad(at, runs[0], lid);
    store_weight_quad(at + 8u, runs[1], lid);
    store_weight_quad(at + 32u, runs[2], lid);
    store_weight_quad(at + 40u, runs[3], lid);
}
