// Each group of `group` columns scaled to length `scale`: x · scale / sqrt(Σx² + eps); one
// threadgroup per group.
#include <metal_stdlib>
using namespace metal;

struct L2NormParams {
    uint group;
    float scale;
    float eps;
};

kernel void l2_norm(constant L2NormParams& p [[buffer(0)]],
                    device const float* x [[buffer(1)]],
                    device float* out [[buffer(2)]],
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
    float factor = p.scale / sqrt(total + p.eps);
    for (uint i = tid; i < p.group; i += threads) {
        out[base + i] = x[base + i] * factor;
    }
}
