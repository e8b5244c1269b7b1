// attention_decode.wgsl's scores by parts of a subgroup (lib/decode_key_row_parts.wgsl), a
// part's partial dot products summed by shuffles within the subgroup.

struct KeyLane {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) index: u32,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(subgroup_size) size: u32,
}

// Invocations per key row where the subgroup holds that many.
const KEY_PARTS: u32 = 8u;

// Row `lid` of the tile dotted with each head's q (for lid < len). Every invocation calls it
// with the same len and heads, so the shuffles run in uniform control flow; a short split (a
// few dozen rows) takes only the rounds it fills. The scores pass through by_head.
fn key_scores(
    tile: u32,
    len: u32,
    heads: u32,
    lanes: u32,
    kv_base: u32,
    lane: KeyLane,
) -> array<f32, HEADS> {
    let parts = min(KEY_PARTS, lane.size);
    let part_lane = lane.index % parts;
    let part = lane.subgroup * (lane.size / parts) + lane.index / parts;
    for (var round_first = 0u; round_first < len; round_first += WG / parts) {
        let row = round_first + part;
        let key_row = tile + min(row, len - 1u);
        var dots = partial_key_dots(key_row, part_lane, parts, heads, lanes, kv_base);
        for (var mask = 1u; mask < parts; mask <<= 1u) {
            for (var h = 0u; h < HEADS; h++) {
                if (h < heads) {
                    dots[h] += subgroupShuffleXor(dots[h], mask);
                }
            }
        }
        if (part_lane == 0u && row < len) {
            for (var h = 0u; h < HEADS; h++) {
                by_head[h * TILE + row] = dots[h];
            }
        }
    }
    workgroupBarrier();
    var scores: array<f32, HEADS>;
    for (var h = 0u; h < HEADS; h++) {
        scores[h] = by_head[h * TILE + lane.lid];
    }
    return scores;
}
