// GEMV with Q4_K weights. A SIMD-group works on 4 super-blocks at once, 8 lanes each: lane
// 8s + 2c + h takes bytes 16h..16h+15 of chunk c (64 values), i.e. 16 values of sub-block 2c (low
// nibbles) and 16 of sub-block 2c + 1 (high nibbles): one aligned 16-byte load of quants and
// 8 float4 loads of activations per super-block, the activations reused for every row.
// Each sub-block's min multiplies the sum of its activations, which is computed once.
#include <metal_stdlib>
using namespace metal;

// Rows per SIMD-group (the host's launch plan has rows per threadgroup = 2 × this).
constant uint Q4_K_ROWS = 2;

kernel void gemv_q4_k(constant GemvParams& p [[buffer(0)]],
                      device const uchar* w [[buffer(1)]],
                      device const float* x [[buffer(2)]],
                      device float* out [[buffer(3)]],
                      device const float* other [[buffer(4)]],
                      uint group [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd_group [[simdgroup_index_in_threadgroup]],
                      uint simd_groups [[simdgroups_per_threadgroup]]) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, Q4_K_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    uint slot = lane / 8;
    uint chunk = (lane % 8) / 2;
    uint half_ = lane % 2;
    uint lane_col = 64 * chunk + 16 * half_;
    uint blocks = p.cols / 256;
    float acc[Q4_K_ROWS] = {};
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
        for (uint r = 0; r < Q4_K_ROWS && tile.first + r < p.rows; r++) {
            device const block_q4_k& blk =
                ((device const block_q4_k*)gemv_row(w, p, tile.first + r))[b];
            uint4 q = *(device const uint4*)(blk.qs + 32 * chunk + 16 * half_);
            float lo_dot = 0.0f;
            float hi_dot = 0.0f;
            for (uint i = 0; i < 4; i++) {
                uint word = q[i];
                lo_dot += dot(float4(word & 15, (word >> 8) & 15, (word >> 16) & 15, (word >> 24) & 15),
                              lo[i]);
                hi_dot += dot(float4((word >> 4) & 15, (word >> 12) & 15, (word >> 20) & 15, word >> 28),
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
    gemv_store<Q4_K_ROWS>(p, acc, tile, lane, out, input.scale(p));
}
