// The cooperative GEMM's weight tile from the f16 scratch matrix of half_weights*.wgsl (rows
// padded with zeros to whole tiles, columns to whole steps). A subgroup fetches and stores one
// whole tile row at a time (a word, two halves, a lane), which keeps the workgroup-memory stores
// free of bank conflicts.

@group(0) @binding(1) var<storage, read> w16: array<u32>;

var<private> w_fetched: array<u32, FETCHES>;

// Columns k0..k0+DEPTH of the tile's weight rows into registers.
fn fetch_weights(first_row: u32, k0: u32, lid: u32) {
    let row_words = p.padded_cols / 2u;
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        w_fetched[j] = w16[(first_row + i / ROW_WORDS) * row_words + k0 / 2u + i % ROW_WORDS];
    }
}

// The fetched columns into the weight tile.
fn store_weights(lid: u32) {
    for (var j = 0u; j < FETCHES; j++) {
        let i = lid + j * THREADS;
        store_weight_word(i / ROW_WORDS * TILE_STRIDE + 2u * (i % ROW_WORDS), w_fetched[j]);
    }
}
