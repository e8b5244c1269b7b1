// attention_decode.wgsl's scores, a key row per part of `parts` neighbouring invocations of a
// subgroup: invocation j of a part takes vec4s j, j + parts, … of the row, so that a load
// instruction of a subgroup reads whole runs of parts × 16 bytes (a 128-byte line for parts of
// 8), and the part's partial dot products are summed by shuffles within the subgroup. The
// WG / parts parts take a round of as many rows at a time, the tile in `parts` rounds.

struct KeyLane {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) index: u32,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(subgroup_size) size: u32,
}

// Invocations per key row where the subgroup holds that many.
const KEY_PARTS: u32 = 8u;

// Writes the scaled scores of the tile's first `len` rows into by_head. Every invocation
// calls it together with the same len and heads, so the shuffles run in uniform control flow;
// a short split (a few dozen rows) takes only the rounds it fills.
fn score_keys(tile: u32, len: u32, heads: u32, lanes: u32, kv_base: u32, lane: KeyLane) {
    let parts = min(KEY_PARTS, lane.size);
    let part_lane = lane.index % parts;
    let part = lane.subgroup * (lane.size / parts) + lane.index / parts;
    let round_rows = WG / parts;
    for (var round_first = 0u; round_first < len; round_first += round_rows) {
        let row = round_first + part;
        let key_row = tile + min(row, len - 1u);
        var scores: array<f32, HEADS>;
        for (var h = 0u; h < HEADS; h++) {
            scores[h] = 0.0;
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
                            scores[h] += dot(q_heads[h * MAX_LANES + l + u * parts], keys[u]);
                        }
                    }
                }
            }
        }
        for (var mask = 1u; mask < parts; mask <<= 1u) {
            for (var h = 0u; h < HEADS; h++) {
                if (h < heads) {
                    scores[h] += subgroupShuffleXor(scores[h], mask);
                }
            }
        }
        if (part_lane == 0u && row < len) {
            for (var h = 0u; h < HEADS; h++) {
                by_head[h * TILE + row] = scores[h] * p.scale;
            }
        }
    }
}
