// The cooperative GEMM's weight rows from the f16 scratch matrix of half_weights*.wgsl: rows of
// padded_cols halves, two a word, zero rows past the weight's to whole tiles. Each invocation
// fetches words of the tile's rows as gemm_coop.wgsl fetches x's.

@group(0) @binding(2) var<storage, read> w16: array<u32>;

var<private> w_fetched: array<u32, FETCHES>;

// Columns k0..k0+DEPTH of weight rows first_row.. into registers.
fn fetch_weights(first_row: u32, k0: u32, lid: u32) {
    let row_words = p.padded_cols / 2u;
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        w_fetched[j] = w16[(first_row + i / ROW_WORDS) * row_words + k0 / 2u + i % ROW_WORDS];
    }
}

// The fetched weights into w_tile.
fn store_weights(lid: u32) {
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        let at = i / ROW_WORDS * TILE_STRIDE + 2u * (i % ROW_WORDS);
        // Exact: f16 → f32 → f16.
        let ws = vec2<f16>(unpack2x16float(w_fetched[j]));
        w_tile[at] = ws.x;
        w_tile[at + 1u] = ws.y;
    }
}
