// Embedding rows, dequantized, one 32-value unit per thread: for each output row t, the token's
// row of this part of the table (rows first_row.. of the whole table), or nothing when the token
// is in another part. The token is `token` (one output row, out_row) or, with from_ids, the exact
// f32 id in ids[t] (as argmax.metal leaves it) for each of `tokens` rows. The host names the
// table's block type WeightBlock.
#include <metal_stdlib>
using namespace metal;

struct EmbedParams {
    uint token;
    uint out_row;
    uint from_ids;
    uint tokens;
    uint first_row;
    uint part_rows;
    uint row_bytes;
    uint units;
};

kernel void embed(constant EmbedParams& p [[buffer(0)]],
                  device const uchar* table [[buffer(1)]],
                  device const float* ids [[buffer(2)]],
                  device float* out [[buffer(3)]],
                  uint index [[thread_position_in_grid]]) {
    uint t = index / p.units;
    uint unit = index % p.units;
    if (t >= p.tokens) {
        return;
    }
    float token = p.from_ids != 0 ? ids[t] : float(p.token);
    uint out_row = p.from_ids != 0 ? t : p.out_row;
    // Not a number argmax gives, or another part's row: nothing to write.
    if (!(token >= float(p.first_row) && token < float(p.first_row + p.part_rows))) {
        return;
    }
    uint row = uint(token) - p.first_row;
    device const WeightBlock* blocks = (device const WeightBlock*)(table + row * p.row_bytes);
    float values[32];
    dequantize_unit(blocks[unit / WeightBlock::UNITS], unit % WeightBlock::UNITS, values);
    device float* dst = out + (out_row * p.units + unit) * 32;
    for (uint l = 0; l < 32; l++) {
        dst[l] = values[l];
    }
}
