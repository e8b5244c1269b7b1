// attention_decode.wgsl's scores, one key row per invocation: invocation r dots row r of the
// tile with every head's q (a broadcast from workgroup memory), so that a score needs no
// reduction across invocations. Neighbouring invocations read rows a whole row apart, so a
// load instruction of a subgroup touches as many cache lines as it has invocations; kept for
// devices without subgroup operations, and to compare (`--strided-key-attention`).

struct KeyLane {
    @builtin(local_invocation_index) lid: u32,
}

// Writes the scaled scores of the tile's first `len` rows into by_head.
fn score_keys(tile: u32, len: u32, heads: u32, lanes: u32, kv_base: u32, lane: KeyLane) {
    let lid = lane.lid;
    if (lid >= len) {
        return;
    }
    var scores: array<f32, HEADS>;
    for (var h = 0u; h < HEADS; h++) {
        scores[h] = 0.0;
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
    for (var h = 0u; h < HEADS; h++) {
        by_head[h * TILE + lid] = scores[h] * p.scale;
    }
}
