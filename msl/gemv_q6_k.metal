// GEMV with Q6_K weights. A SIMD-group works on 4 super-blocks at once, 8 lanes each: lane
// 8s + 4n + j takes l = 8j..8j+7 of half n in all four quadrants (32 values): 8 bytes from each
// of the two ql runs, 8 bytes of qh, and 8 float4 loads of activations. Blocks are 210 bytes,
// so quants are read a byte at a time. The −32 offset multiplies each quadrant's activation sum.
#include <metal_stdlib>
using namespace metal;

constant uint Q6_K_ROWS = 2;

kernel void gemv_q6_k(constant GemvParams& p [[buffer(0)]],
                      device const uchar* w [[buffer(1)]],
                      device const float* x [[buffer(2)]],
                      device float* out [[buffer(3)]],
                      device const float* other [[buffer(4)]],
                      uint group [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd_group [[simdgroup_index_in_threadgroup]],
                      uint simd_groups [[simdgroups_per_threadgroup]]) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, Q6_K_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    uint slot = lane / 8;
    uint n = (lane % 8) / 4;
    uint l0 = 8 * (lane % 4);
    uint lane_col = 128 * n + l0;
    uint blocks = p.cols / 256;
    float acc[Q6_K_ROWS] = {};
    for (uint b = slot; b < blocks; b += 4) {
        // Quadrant c's 8 activations are xs[2c], xs[2c + 1].
        uint xb = lane_col + 256 * b;
        float4 xs[8];
        float sums[4];
        for (uint c = 0; c < 4; c++) {
            xs[2 * c] = input.x4(xb + 32 * c);
            xs[2 * c + 1] = input.x4(xb + 32 * c + 4);
            float4 both = xs[2 * c] + xs[2 * c + 1];
            sums[c] = both.x + both.y + both.z + both.w;
        }
        for (uint r = 0; r < Q6_K_ROWS && tile.first + r < p.rows; r++) {
            device const block_q6_k& blk =
                ((device const block_q6_k*)gemv_row(w, p, tile.first + r))[b];
            device const uchar* ql = blk.ql + 64 * n + l0;
            device const uchar* qh = blk.qh + 32 * n + l0;
            float dots[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (uint l = 0; l < 8; l++) {
                uint first = ql[l];
                uint second = ql[32 + l];
                uint high = qh[l];
                float4 q = float4((first & 0xF) | ((high & 3) << 4),
                                  (second & 0xF) | (((high >> 2) & 3) << 4),
                                  (first >> 4) | (((high >> 4) & 3) << 4),
                                  (second >> 4) | ((high >> 6) << 4));
                uint k = l / 4;
                uint e = l % 4;
                dots[0] += q.x * xs[k][e];
                dots[1] += q.y * xs[2 + k][e];
                dots[2] += q.z * xs[4 + k][e];
                dots[3] += q.w * xs[6 + k][e];
            }
            device const char* sc = blk.scales + 8 * n + l0 / 16;
            float sum = 0.0f;
            for (uint c = 0; c < 4; c++) {
                sum += float(sc[2 * c]) * (dots[c] - 32.0f * sums[c]);
            }
            acc[r] += float(blk.d) * sum;
        }
    }
    gemv_store<Q6_K_ROWS>(p, acc, tile, lane, out, input.scale(p));
}
