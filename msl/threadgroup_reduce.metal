// Sums across a whole threadgroup: SIMD-group sums, then one partial per SIMD-group in
// threadgroup memory, added in SIMD-group order so that every thread gets the same bits.
#include <metal_stdlib>
using namespace metal;

// At most 1024 threads: 32 SIMD-groups.
constant uint MAX_SIMD_GROUPS = 32;

// Every thread of the group must call it (it holds two barriers); `partial` has one float per
// SIMD-group and may be reused right after the call.
inline float threadgroup_sum(float value, threadgroup float* partial, uint lane, uint simd_group,
                             uint simd_groups) {
    value = simd_sum(value);
    if (lane == 0) {
        partial[simd_group] = value;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = 0.0f;
    for (uint s = 0; s < simd_groups; s++) {
        total += partial[s];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return total;
}
