// Full attention's q and k before the scores: each head RMS-normed with its norm weight, then
// NeoX RoPE (rope_angle.metal) at position pos0 + row. q is the first head_dim of each 2·head_dim
// group of the q projection (the rest is the output gate). One threadgroup per (row, head), q
// heads first; a thread per dim.
#include <metal_stdlib>
using namespace metal;

struct QkNormRopeParams {
    uint n_head;
    uint n_kv_head;
    uint head_dim;
    uint rot_dims;
    uint pos0;
    float base;
    float eps;
};

// 256 threads per threadgroup (the host's launch plan), one per dim.
constant uint MAX_HEAD_DIM = 256;

kernel void qk_norm_rope(constant QkNormRopeParams& p [[buffer(0)]],
                         device const float* q_and_gate [[buffer(1)]],
                         device const float* k [[buffer(2)]],
                         device const float* q_norm [[buffer(3)]],
                         device const float* k_norm [[buffer(4)]],
                         device float* q_out [[buffer(5)]],
                         device float* k_out [[buffer(6)]],
                         uint group [[threadgroup_position_in_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]],
                         uint simd_group [[simdgroup_index_in_threadgroup]],
                         uint simd_groups [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[MAX_SIMD_GROUPS];
    threadgroup float normed[MAX_HEAD_DIM];
    uint heads = p.n_head + p.n_kv_head;
    uint row = group / heads;
    uint head = group % heads;
    uint hd = p.head_dim;
    bool is_q = head < p.n_head;
    device const float* src = is_q ? q_and_gate + (row * p.n_head + head) * 2 * hd
                                   : k + (row * p.n_kv_head + head - p.n_head) * hd;
    device const float* weight = is_q ? q_norm : k_norm;
    device float* dst = is_q ? q_out + (row * p.n_head + head) * hd
                             : k_out + (row * p.n_kv_head + head - p.n_head) * hd;

    float value = tid < hd ? src[tid] : 0.0f;
    float total = threadgroup_sum(value * value, partial, lane, simd_group, simd_groups);
    float scale = 1.0f / sqrt(total / float(hd) + p.eps);
    if (tid < hd) {
        normed[tid] = value * scale * weight[tid];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid < hd) {
        float x = normed[tid];
        if (tid < p.rot_dims) {
            uint half_dims = p.rot_dims / 2;
            float partner = tid < half_dims ? normed[tid + half_dims] : normed[tid - half_dims];
            x = rope_rotate(x, partner, tid, p.rot_dims, p.pos0 + row, p.base);
        }
        dst[tid] = x;
    }
}
