// attention_decode.wgsl's scores by parts of KEY_PARTS invocations
// (lib/decode_key_row_parts.wgsl), a part's partial dot products summed through workgroup
// memory: each round's partials fill by_head (HEADS × WG words, TILE being WG), an invocation
// per (head, part) sums its part's, and the row's own invocation takes the sums.

struct KeyLane {
    @builtin(local_invocation_index) lid: u32,
}

const KEY_PARTS: u32 = 8u;

// Row `lid` of the tile dotted with each head's q (for lid < len). Every invocation calls it
// together (it holds barriers); a short split takes only the rounds it fills.
fn key_scores(
    tile: u32,
    len: u32,
    heads: u32,
    lanes: u32,
    kv_base: u32,
    lane: KeyLane,
) -> array<f32, HEADS> {
    let lid = lane.lid;
    let part_lane = lid % KEY_PARTS;
    let part = lid / KEY_PARTS;
    let round_rows = WG / KEY_PARTS;
    var scores: array<f32, HEADS>;
    for (var round_first = 0u; round_first < len; round_first += round_rows) {
        let row = round_first + part;
        let key_row = tile + min(row, len - 1u);
        let dots = partial_key_dots(key_row, part_lane, KEY_PARTS, heads, lanes, kv_base);
        for (var h = 0u; h < HEADS; h++) {
            by_head[h * WG + lid] = dots[h];
        }
        workgroupBarrier();
        // Each (head, part) sum lands on its part's first word, which only its summer reads.
        for (var i = lid; i < HEADS * round_rows; i += WG) {
            let first = i / round_rows * WG + i % round_rows * KEY_PARTS;
            var sum = 0.0;
            for (var j = 0u; j < KEY_PARTS; j++) {
                sum += by_head[first + j];
            }
            by_head[first] = sum;
        }
        workgroupBarrier();
        if (lid >= round_first && lid - round_first < round_rows) {
            for (var h = 0u; h < HEADS; h++) {
                scores[h] = by_head[h * WG + (lid - round_first) * KEY_PARTS];
            }
        }
        // The sums are read before the next round's partials overwrite them.
        workgroupBarrier();
    }
    return scores;
}
