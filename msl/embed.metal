// One embedding row, dequantized: row `row` of this part of the table into row `out_row` of the
// output, one 32-value unit per thread. The host names the table's block type WeightBlock.
#include <metal_stdlib>
using namespace metal;

struct EmbedParams {
    uint row;
    uint row_bytes;
    uint units;
    uint out_row;
};

kernel void embed(constant EmbedParams& p [[buffer(0)]],
                  device const uchar* table [[buffer(1)]],
                  device float* out [[buffer(2)]],
                  uint unit [[thread_position_in_grid]]) {
    if (unit >= p.units) {
        return;
    }
    device const WeightBlock* row = (device const WeightBlock*)(table + p.row * p.row_bytes);
    float values[32];
    dequantize_unit(row[unit / WeightBlock::UNITS], unit % WeightBlock::UNITS, values);
    device float* dst = out + (p.out_row * p.units + unit) * 32;
    for (uint l = 0; l < 32; l++) {
        dst[l] = values[l];
    }
}
