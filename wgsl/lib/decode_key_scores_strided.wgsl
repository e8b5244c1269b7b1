// attention_decode.wgsl's scores, one key row per invocation: invocation r dots row r of the
// tile with every head's q (a broadcast from workgroup memory), so that a score needs no
// reduction across invocations. Neighbouring invocations read rows a whole row apart, so a
// load instruction of a subgroup touches as many cache lines as it has invocations; kept to
// compare (`--strided-key-attention`).

struct KeyLane {
    @builtin(local_invocation_index) lid: u32,
}

// Row `lid` of the tile dotted with each head's q (for lid < len; every invocation calls it).
fn key_scores(
    tile: u32,
    len: u32,
    heads: u32,
    lanes: u32,
    kv_base: u32,
    lane: KeyLane,
) -> array<f32, HEADS> {
    let lid = lane.lid;
    var scores: array<f32, HEADS>;
    for (var h = 0u; h < HEADS; h++) {
        scores[h] = 0.0;
    }
    if (lid >= len) {
        return scores;
    }
    for (var l = 0u; l < lanes; l += UNROLL) {
        var keys: array<vec4<f32>, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            keys[u] = key_at(tile + lid, kv_base + min(l + u, lanes - 1u));
        }
        for (var u = 0u; u < UNROLL; u++) {
            if (l + u < lanes) {
                for (var h = 0u; h < HEADS; h++) {
                    if (h < heads) {
                        scores[h] += dot(q_heads[h * MAX_LANES + l + u], keys[u]);
                    }
                }
            }
        }
    }
    return scores;
}
