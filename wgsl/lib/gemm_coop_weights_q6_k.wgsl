// The cooperative GEMM's weight tile decoded from Q6_K rows as it is staged, with no f16
// scratch matrix. A step's DEPTH = 64 columns are two of the four 32-element parts of half n of
// a super-block (q6_k_span.wgsl): parts 0 and 1 (the low nibbles and bit pairs 0–1, 2–3) or
// parts 2 and 3 (the high nibbles and pairs 4–5, 6–7) of the same 64 nibble bytes and 32 bytes
// of pairs. Each of the two invocations of a tile row fetches the words of 16 of each part's
// columns (l0 = 0 or 16), as half_weights_q6_k.wgsl does, and decodes them. Rows past `p.rows`
// decode to zeros.

@group(0) @binding(1) var<storage, read> w: array<u32>;

// Two invocations a tile row.
const_assert THREADS == 2u * TILE;

// 16 bytes of the first part's nibbles, of the second's, and of their bit pairs.
var<private> w_first: vec4<u32>;
var<private> w_second: vec4<u32>;
var<private> w_pairs: vec4<u32>;
// d·scale of the step's two parts.
var<private> w_factors: vec2<f32>;
// 0 for parts 0 and 1, 4 for parts 2 and 3: where their bits sit in the fetched bytes.
var<private> w_shift: u32;
var<private> w_live: bool;

// Columns k0..k0+DEPTH of the tile's weight rows into registers, still packed.
fn fetch_weights(first_row: u32, k0: u32, lid: u32) {
    let row = first_row + lid / 2u;
    let quarter = k0 % 256u / 64u;
    w_shift = 4u * (quarter % 2u);
    w_live = row < p.rows;
    if (w_live) {
        let span = q6_k_span(row * p.row_bytes, k0 / 256u, quarter / 2u, 16u * (lid % 2u));
        let f = span.d * span.scales;
        w_factors = select(f.xy, f.zw, quarter % 2u == 1u);
        w_first = four_words_at(span.ql);
        w_second = four_words_at(span.ql + 32u);
        w_pairs = four_words_at(span.qh);
    }
}

// The fetched columns decoded into the weight tile: the first part is the step's first 32
// columns, the second its last.
fn store_weights(lid: u32) {
    let at = lid / 2u * TILE_STRIDE + 16u * (lid % 2u);
    let first = w_first >> vec4<u32>(w_shift);
    let second = w_second >> vec4<u32>(w_shift);
    let pairs = w_pairs >> vec4<u32>(w_shift);
    let second_pairs = pairs >> vec4<u32>(2u);
    var runs = array<vec4<u32>, 4>();
    if (w_live) {
        runs[0] = q6_k_eight_halves(w_factors.x, first.x, first.y, pairs.x, pairs.y);
        runs[1] = q6_k_eight_halves(w_factors.x, first.z, first.w, pairs.z, pairs.w);
        runs[2] = q6_k_eight_halves(w_factors.y, second.x, second.y, second_pairs.x, second_pairs.y);
        runs[3] = q6_k_eight_halves(w_factors.y, second.z, second.w, second_pairs.z, second_pairs.w);
    }
    store_weight_quad(at, runs[0], lid);
    store_weight_quad(at + 8u, runs[1], lid);
    store_weight_quad(at + 32u, runs[2], lid);
    store_weight_quad(at + 40u, runs[3], lid);
}
