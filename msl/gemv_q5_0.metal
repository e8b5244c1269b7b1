// GEMV with Q5_0 weights. A SIMD-group works on 8 blocks at once, 4 lanes each: lane 4s + j
// takes values 4j..4j+3 (low nibbles) and 16 + 4j..16 + 4j + 3 (high nibbles) of its block, from
// 4 quant bytes. The −16 offset multiplies the activation sum.
#include <metal_stdlib>
using namespace metal;

constant uint Q5_0_ROWS = 4;

kernel void gemv_q5_0(constant GemvParams& p [[buffer(0)]],
                      device const uchar* w [[buffer(1)]],
                      device const float* x [[buffer(2)]],
                      device float* out [[buffer(3)]],
                      device const float* other [[buffer(4)]],
                      uint group [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd_group [[simdgroup_index_in_threadgroup]],
                      uint simd_groups [[simdgroups_per_threadgroup]]) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, Q5_0_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    uint slot = lane / 4;
    uint part = lane % 4;
    uint lane_col = 4 * part;
    uint blocks = p.cols / 32;
    float acc[Q5_0_ROWS] = {};
    for (uint b = slot; b < blocks; b += 8) {
        float4 lo = input.x4(lane_col + 32 * b);
        float4 hi = input.x4(lane_col + 32 * b + 16);
        float x_sum = lo.x + lo.y + lo.z + lo.w + hi.x + hi.y + hi.z + hi.w;
        for (uint r = 0; r < Q5_0_ROWS && tile.first + r < p.rows; r++) {
            device const block_q5_0& blk =
                ((device const block_q5_0*)gemv_row(w, p, tile.first + r))[b];
            // Blocks are 22 bytes: the high bits are read as two 16-bit halves.
            device const ushort* qh16 = (device const ushort*)blk.qh;
            uint high = (uint(qh16[0]) | (uint(qh16[1]) << 16)) >> (4 * part);
            device const uchar* q = blk.qs + 4 * part;
            float4 ql = float4((q[0] & 0xF) | ((high & 1) << 4), (q[1] & 0xF) | (((high >> 1) & 1) << 4),
                               (q[2] & 0xF) | (((high >> 2) & 1) << 4), (q[3] & 0xF) | (((high >> 3) & 1) << 4));
            float4 qhi = float4((q[0] >> 4) | (((high >> 16) & 1) << 4), (q[1] >> 4) | (((high >> 17) & 1) << 4),
                                (q[2] >> 4) | (((high >> 18) & 1) << 4), (q[3] >> 4) | (((high >> 19) & 1) << 4));
            acc[r] += float(blk.d) * (dot(ql, lo) + dot(qhi, hi) - 16.0f * x_sum);
        }
    }
    gemv_store<Q5_0_ROWS>(p, acc, tile, lane, out, input.scale(p));
}
