// GEMV with Q5_K weights: the Q4_K lane layout (lane 8s + 2c + h: 16 values each of sub-blocks
// 2c and 2c + 1), plus the fifth bits from the lane's 16 bytes of qh (bit 2c for the low
// sub-block, 2c + 1 for the high one). One row per SIMD-group: the extra bits cost registers.
#include <metal_stdlib>
using namespace metal;

constant uint Q5_K_ROWS = 1;

kernel void gemv_q5_k(constant GemvParams& p [[buffer(0)]],
                      device const uchar* w [[buffer(1)]],
                      device const float* x [[buffer(2)]],
                      device float* out [[buffer(3)]],
                      device const float* other [[buffer(4)]],
                      uint group [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd_group [[simdgroup_index_in_threadgroup]],
                      uint simd_groups [[simdgroups_per_threadgroup]]) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, Q5_K_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    uint slot = lane / 8;
    uint chunk = (lane % 8) / 2;
    uint half_ = lane % 2;
    uint lane_col = 64 * chunk + 16 * half_;
    uint blocks = p.cols / 256;
    float acc[Q5_K_ROWS] = {};
    for (uint b = slot; b < blocks; b += 4) {
        uint xb = lane_col + 256 * b;
        float4 lo[4];
        float4 hi[4];
        float lo_sum = 0.0f;
        float hi_sum = 0.0f;
        for (uint i = 0; i < 4; i++) {
            lo[i] = input.x4(xb + 4 * i);
            hi[i] = input.x4(xb + 32 + 4 * i);
            lo_sum += lo[i].x + lo[i].y + lo[i].z + lo[i].w;
            hi_sum += hi[i].x + hi[i].y + hi[i].z + hi[i].w;
        }
        for (uint r = 0; r < Q5_K_ROWS && tile.first + r < p.rows; r++) {
            device const block_q5_k& blk =
                ((device const block_q5_k*)gemv_row(w, p, tile.first + r))[b];
            uint4 q = *(device const uint4*)(blk.qs + 32 * chunk + 16 * half_);
            uint4 qh = *(device const uint4*)(blk.qh + 16 * half_);
            uint lo_bit = 2 * chunk;
            float lo_dot = 0.0f;
            float hi_dot = 0.0f;
            for (uint i = 0; i < 4; i++) {
                uint word = q[i];
                // Bit lo_bit (and lo_bit + 1) of each byte of the high-bit word, as 16 (or 0).
                uint lo_high = ((qh[i] >> lo_bit) & 0x01010101u) << 4;
                uint hi_high = ((qh[i] >> (lo_bit + 1)) & 0x01010101u) << 4;
                uint lo_q = (word & 0x0F0F0F0Fu) | lo_high;
                uint hi_q = ((word >> 4) & 0x0F0F0F0Fu) | hi_high;
                lo_dot += dot(float4(lo_q & 0xFF, (lo_q >> 8) & 0xFF, (lo_q >> 16) & 0xFF, lo_q >> 24),
                              lo[i]);
                hi_dot += dot(float4(hi_q & 0xFF, (hi_q >> 8) & 0xFF, (hi_q >> 16) & 0xFF, hi_q >> 24),
                              hi[i]);
            }
            uchar2 lo_sm = kquant_scale_min(blk.scales, 2 * chunk);
            uchar2 hi_sm = kquant_scale_min(blk.scales, 2 * chunk + 1);
            float d = blk.d;
            float dmin = blk.dmin;
            acc[r] += d * (float(lo_sm.x) * lo_dot + float(hi_sm.x) * hi_dot) -
                      dmin * (float(lo_sm.y) * lo_sum + float(hi_sm.y) * hi_sum);
        }
    }
    gemv_store<Q5_K_ROWS>(p, acc, tile, lane, out, input.scale(p));
}
