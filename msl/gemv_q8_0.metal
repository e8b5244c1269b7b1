// GEMV with Q8_0 weights. A SIMD-group works on 8 blocks at once, 4 lanes each: lane 4s + j
// takes values 8j..8j+7 of its block. Little decoding work per byte, so more rows at once: 4
// SIMD-groups of 2 rows each.
#include <metal_stdlib>
using namespace metal;

constant uint Q8_0_ROWS = 2;

kernel void gemv_q8_0(constant GemvParams& p [[buffer(0)]],
                      device const uchar* w [[buffer(1)]],
                      device const float* x [[buffer(2)]],
                      device float* out [[buffer(3)]],
                      device const float* other [[buffer(4)]],
                      uint group [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd_group [[simdgroup_index_in_threadgroup]],
                      uint simd_groups [[simdgroups_per_threadgroup]]) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, Q8_0_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    uint slot = lane / 4;
    uint part = lane % 4;
    uint lane_col = 8 * part;
    uint blocks = p.cols / 32;
    float acc[Q8_0_ROWS] = {};
    for (uint b = slot; b < blocks; b += 8) {
        uint xb = lane_col + 32 * b;
        float4 x0 = input.x4(xb);
        float4 x1 = input.x4(xb + 4);
        for (uint r = 0; r < Q8_0_ROWS && tile.first + r < p.rows; r++) {
            device const block_q8_0& blk =
                ((device const block_q8_0*)gemv_row(w, p, tile.first + r))[b];
            device const char* q = blk.qs + 8 * part;
            float sum = dot(float4(q[0], q[1], q[2], q[3]), x0) + dot(float4(q[4], q[5], q[6], q[7]), x1);
            acc[r] += float(blk.d) * sum;
        }
    }
    gemv_store<Q8_0_ROWS>(p, acc, tile, lane, out, input.scale(p));
}
