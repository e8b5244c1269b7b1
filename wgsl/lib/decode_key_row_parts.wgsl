// The coalesced key reads of attention_decode.wgsl's scores (lib/decode_key_scores_subgroup.wgsl
// and _shared.wgsl): a key row per part of `parts` neighbouring invocations, invocation j of a
// part taking vec4s j, j + parts, … of the row, so that a load instruction of a subgroup reads
// whole runs of parts × 16 bytes (a 128-byte line for parts of 8). The WG / parts parts take a
// round of as many rows at a time; each part's partial dot products are then summed.

// This invocation's share of the dot products of `key_row` with each head's q.
fn partial_key_dots(
    key_row: u32,
    part_lane: u32,
    parts: u32,
    heads: u32,
    lanes: u32,
    kv_base: u32,
) -> array<f32, HEADS> {
    var dots: array<f32, HEADS>;
    for (var h = 0u; h < HEADS; h++) {
        dots[h] = 0.0;
    }
    for (var l = part_lane; l < lanes; l += parts * UNROLL) {
        var keys: array<vec4<f32>, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            keys[u] = key_at(key_row, kv_base + min(l + u * parts, lanes - 1u));
        }
        for (var u = 0u; u < UNROLL; u++) {
            if (l + u * parts < lanes) {
                for (var h = 0u; h < HEADS; h++) {
                    if (h < heads) {
                        dots[h] += dot(q_heads[h * MAX_LANES + l + u * parts], keys[u]);
                    }
                }
            }
        }
    }
    return dots;
}
