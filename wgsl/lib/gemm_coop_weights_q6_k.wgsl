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

// For k = 0, 1: two words of the first part's nibbles, two of the second's, two of pairs.
var<private> w_quants: array<u32, 12>;
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
        for (var k = 0u; k < 2u; k++) {
            w_quants[6u * k] = word_at(span.ql + 8u * k);
            w_quants[6u * k + 1u] = word_at(span.ql + 8u * k + 4u);
            w_quants[6u * k + 2u] = word_at(span.ql + 32u + 8u * k);
            w_quants[6u * k + 3u] = word_at(span.ql + 36u + 8u * k);
            w_quants[6u * k + 4u] = word_at(span.qh + 8u * k);
            w_quants[6u * k + 5u] = word_at(span.qh + 8u * k + 4u);
        }
    }
}

// The fetched columns decoded into the weight tile: the first part is the step's first 32
// columns, the second its last.
fn store_weights(lid: u32) {
    let at = lid / 2u * TILE_STRIDE + 16u * (lid % 2u);
    let s = w_shift;
    for (var k = 0u; k < 2u; k++) {
        var first = vec4<u32>();
        var second = vec4<u32>();
        if (w_live) {
            let q = 6u * k;
            first = q6_k_eight_halves(
                w_factors.x,
                w_quants[q] >> s,
                w_quants[q + 1u] >> s,
                w_quants[q + 4u] >> s,
                w_quants[q + 5u] >> s,
            );
            second = q6_k_eight_halves(
                w_factors.y,
                w_quants[q + 2u] >> s,
                w_quants[q + 3u] >> s,
                w_quants[q + 4u] >> (s + 2u),
                w_quants[q + 5u] >> (s + 2u),
            );
        }
        store_weight_quad(at + 8u * k, first, lid);
        store_weight_quad(at + 32u + 8u * k, second, lid);
    }
}
