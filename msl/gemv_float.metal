// GEMV with f32 or f16 weights (the kernels gemv_f32 and gemv_f16, one template): each lane takes
// 4 consecutive columns per step (four weights, widened to float, against a float4 of
// activations), a SIMD-group 128 columns; rows whose length is not a multiple of 4 are not
// aligned to four weights and take a scalar loop instead.
#include <metal_stdlib>
using namespace metal;

constant uint FLOAT_ROWS = 4;

// W: the weights' element type; W4: four of them.
template <typename W, typename W4>
void gemv_float(constant GemvParams& p, device const uchar* w, device const float* x,
                device float* out, device const float* other, uint group, uint lane,
                uint simd_group, uint simd_groups) {
    GemvTile tile = gemv_tile(p, group, simd_group, simd_groups, FLOAT_ROWS);
    GemvInput input = gemv_input(p, x, other, tile.token);
    float acc[FLOAT_ROWS] = {};
    if (p.cols % 4 == 0) {
        for (uint i = 4 * lane; i < p.cols; i += 128) {
            float4 xv = input.x4(i);
            for (uint r = 0; r < FLOAT_ROWS && tile.first + r < p.rows; r++) {
                device const W* row = (device const W*)gemv_row(w, p, tile.first + r);
                acc[r] += dot(float4(*(device const W4*)(row + i)), xv);
            }
        }
    } else {
        for (uint i = lane; i < p.cols; i += 32) {
            float xv = input.x1(i);
            for (uint r = 0; r < FLOAT_ROWS && tile.first + r < p.rows; r++) {
                device const W* row = (device const W*)gemv_row(w, p, tile.first + r);
                acc[r] += float(row[i]) * xv;
            }
        }
    }
    gemv_store<FLOAT_ROWS>(p, acc, tile, lane, out, input.scale(p));
}

#define GEMV_FLOAT_KERNEL(NAME, W, W4)                                                        \
    kernel void NAME(constant GemvParams& p [[buffer(0)]],                                    \
                     device const uchar* w [[buffer(1)]],                                     \
                     device const float* x [[buffer(2)]],                                     \
                     device float* out [[buffer(3)]],                                         \
                     device const float* other [[buffer(4)]],                                 \
                     uint group [[threadgroup_position_in_grid]],                             \
                     uint lane [[thread_index_in_simdgroup]],                                 \
                     uint simd_group [[simdgroup_index_in_threadgroup]],                      \
                     uint simd_groups [[simdgroups_per_threadgroup]]) {                       \
        gemv_float<W, W4>(p, w, x, out, other, group, lane, simd_group, simd_groups);          \
    }

GEMV_FLOAT_KERNEL(gemv_f32, float, float4)
GEMV_FLOAT_KERNEL(gemv_f16, half, half4)
