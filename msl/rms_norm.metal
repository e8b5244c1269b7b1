// RMS norm over each group of `group` columns, times the weight row, and for the Gated DeltaNet
// output (gated = 1) times silu(z): one threadgroup per group.
#include <metal_stdlib>
using namespace metal;

struct RmsNormParams {
    uint group;
    float eps;
    uint gated;
};

kernel void rms_norm(constant RmsNormParams& p [[buffer(0)]],
                     device const float* x [[buffer(1)]],
                     device const float* w [[buffer(2)]],
                     device const float* z [[buffer(3)]],
                     device float* out [[buffer(4)]],
                     uint group [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint threads [[threads_per_threadgroup]],
                     uint lane [[thread_index_in_simdgroup]],
                     uint simd_group [[simdgroup_index_in_threadgroup]],
                     uint simd_groups [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[MAX_SIMD_GROUPS];
    uint base = group * p.group;
    float squares = 0.0f;
    for (uint i = tid; i < p.group; i += threads) {
        float v = x[base + i];
        squares += v * v;
    }
    float total = threadgroup_sum(squares, partial, lane, simd_group, simd_groups);
    float scale = 1.0f / sqrt(total / float(p.group) + p.eps);
    for (uint i = tid; i < p.group; i += threads) {
        float v = x[base + i] * scale * w[i];
        if (p.gated != 0) {
            float g = z[base + i];
            v *= g / (1.0f + exp(-g));
        }
        out[base + i] = v;
    }
}
