// The cooperative GEMM's weight rows decoded from the weight's own Q4_K blocks inside the GEMM,
// so that no f16 copy of the weight is written to memory and read back (half_weights_q4_k.wgsl
// and gemm_weights_f16.wgsl). A step's DEPTH columns are sub-blocks 2c and 2c+1 of one
// super-block: per row its 16-byte header (d, dmin, the packed scales and mins) and 32 bytes of
// nibbles, the low ones sub-block 2c, the high ones 2c+1. Two invocations a row, each loading the
// header and 16 bytes of nibbles and decoding 16 columns of each sub-block. Rows past p.rows (the
// part's) decode as zeros; values beyond the f16 range are clamped to it, as in the scratch.

@group(0) @binding(2) var<storage, read> wq: array<vec4<u32>>;

const Q4_K_F16_MAX: f32 = 65504.0;
const_assert DEPTH == 64u;
const_assert THREADS == 2u * TILE;

var<private> head_fetched: vec4<u32>;
var<private> nibbles_fetched: vec4<u32>;
var<private> pair_fetched: u32;

// Columns k0..k0+DEPTH of weight rows first_row.. (of the part) into registers.
fn fetch_weights(first_row: u32, k0: u32, lid: u32) {
    let row = first_row + lid / 2u;
    pair_fetched = (k0 % 256u) / 64u;
    head_fetched = vec4<u32>(0u);
    nibbles_fetched = vec4<u32>(0u);
    if (row < p.rows) {
        let v = row * (p.row_bytes / 16u) + (k0 / 256u) * 9u;
        head_fetched = wq[v];
        nibbles_fetched = wq[v + 1u + 2u * pair_fetched + lid % 2u];
    }
}

fn store_q4_k_quad(at: u32, values: vec4<f32>) {
    let h = vec4<f16>(clamp(values, vec4<f32>(-Q4_K_F16_MAX), vec4<f32>(Q4_K_F16_MAX)));
    w_tile[at] = h.x;
    w_tile[at + 1u] = h.y;
    w_tile[at + 2u] = h.z;
    w_tile[at + 3u] = h.w;
}

// The fetched blocks decoded into w_tile.
fn store_weights(lid: u32) {
    let f = q4_k_span_factors(head_fetched, pair_fetched);
    let q = nibbles_fetched;
    let low = (lid / 2u) * TILE_STRIDE + 16u * (lid % 2u);
    let high = low + 32u;
    store_q4_k_quad(low, f.x * low_nibbles(q.x) - f.z);
    store_q4_k_quad(low + 4u, f.x * low_nibbles(q.y) - f.z);
    store_q4_k_quad(low + 8u, f.x * low_nibbles(q.z) - f.z);
    store_q4_k_quad(low + 12u, f.x * low_nibbles(q.w) - f.z);
    store_q4_k_quad(high, f.y * high_nibbles(q.x) - f.w);
    store_q4_k_quad(high + 4u, f.y * high_nibbles(q.y) - f.w);
    store_q4_k_quad(high + 8u, f.y * high_nibbles(q.z) - f.w);
    store_q4_k_quad(high + 12u, f.y * high_nibbles(q.w) - f.w);
}
