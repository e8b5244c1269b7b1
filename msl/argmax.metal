// The index of the largest of n values, as the host's sampler picks it: the lowest index wins
// ties and NaN never wins (all NaN gives n − 1), as an exact f32 (n < 2^24) that embed.metal
// reads back as a token id. One threadgroup.
#include <metal_stdlib>
using namespace metal;

struct ArgmaxParams {
    uint n;
};

constant uint NONE = 0xFFFFFFFFu;

// The better of two candidates (value, index); NONE marks no candidate.
inline bool better(float value, uint index, float best_value, uint best_index) {
    if (index == NONE) {
        return false;
    }
    return best_index == NONE || value > best_value || (value == best_value && index < best_index);
}

kernel void argmax(constant ArgmaxParams& p [[buffer(0)]],
                   device const float* values [[buffer(1)]],
                   device float* out [[buffer(2)]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint threads [[threads_per_threadgroup]],
                   uint lane [[thread_index_in_simdgroup]],
                   uint simd_group [[simdgroup_index_in_threadgroup]],
                   uint simd_groups [[simdgroups_per_threadgroup]]) {
    threadgroup float group_value[32];
    threadgroup uint group_index[32];
    float best_value = -INFINITY;
    uint best_index = NONE;
    for (uint i = tid; i < p.n; i += threads) {
        float v = values[i];
        if (!isnan(v) && better(v, i, best_value, best_index)) {
            best_value = v;
            best_index = i;
        }
    }
    // Within the SIMD-group: the largest value, then the lowest index holding it.
    float top = simd_max(best_index == NONE ? -INFINITY : best_value);
    uint top_index = simd_min(best_index != NONE && best_value == top ? best_index : NONE);
    if (lane == 0) {
        group_value[simd_group] = top;
        group_index[simd_group] = top_index;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float value = -INFINITY;
        uint index = NONE;
        for (uint s = 0; s < simd_groups; s++) {
            if (better(group_value[s], group_index[s], value, index)) {
                value = group_value[s];
                index = group_index[s];
            }
        }
        out[0] = float(index == NONE ? p.n - 1 : index);
    }
}
