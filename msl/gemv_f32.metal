// GEMV with f32 weights: each lane takes 4 consecutive columns per step (one float4 of weights
// and of activations), a SIMD-group 128 columns; rows whose length is not a multiple of 4 are
// not 16-byte aligned and take a scalar loop instead.
#include <metal_stdlib>
using namespace metal;

constant uint F32_ROWS = 4;

kernel void gemv_f32(constant GemvParams& p [[buffer(0)]],
                     device const uchar* w [[buffer(1)]],
                     device const float* x [[buffer(2)]],
                     device float* out [[buffer(3)]],
                     device const float* other [[buffer(4)]],
                     uint group [[threadgroup_position_in_grid]],
                     uint lane [[thread_index_in_simdgroup]],
                     uint simd_group [[simdgroup_index_in_threadgroup]],
                     uint simd_groups [[simdgroups_per_threadgroup]]) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, F32_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    float acc[F32_ROWS] = {};
    if (p.cols % 4 == 0) {
        for (uint i = 4 * lane; i < p.cols; i += 128) {
            float4 xv = input.x4(i);
            for (uint r = 0; r < F32_ROWS && tile.first + r < p.rows; r++) {
                device const float* row = (device const float*)gemv_row(w, p, tile.first + r);
                acc[r] += dot(*(device const float4*)(row + i), xv);
            }
        }
    } else {
        for (uint i = lane; i < p.cols; i += 32) {
            float xv = input.x1(i);
            for (uint r = 0; r < F32_ROWS && tile.first + r < p.rows; r++) {
                device const float* row = (device const float*)gemv_row(w, p, tile.first + r);
                acc[r] += row[i] * xv;
            }
        }
    }
    gemv_store<F32_ROWS>(p, acc, tile, lane, out, input.scale(p));
}
