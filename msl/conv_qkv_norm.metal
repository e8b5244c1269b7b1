// The Gated DeltaNet's conv + SiLU (causal_conv.metal) of the qkv projection, split into q, k and
// v, with q and k L2-normalised per head (x · scale / sqrt(Σx² + eps), q's scale q_scale): one
// threadgroup per head of q, then k, then v, each thread holding a few of the head's channels.
#include <metal_stdlib>
using namespace metal;

struct ConvQkvNormParams {
    uint n_k_head;
    uint k_dim;
    uint n_v_head;
    uint v_dim;
    uint taps;
    uint rows;
    float q_scale;
    float eps;
};

// With 256 threads (the host's launch plan), heads of up to 1024 channels.
constant uint CHANNELS_PER_THREAD = 4;

kernel void conv_qkv_norm(constant ConvQkvNormParams& p [[buffer(0)]],
                          device const float* m [[buffer(1)]],
                          device const float* w [[buffer(2)]],
                          device float* state [[buffer(3)]],
                          device float* q [[buffer(4)]],
                          device float* k [[buffer(5)]],
                          device float* v [[buffer(6)]],
                          uint group [[threadgroup_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint threads [[threads_per_threadgroup]],
                          uint lane [[thread_index_in_simdgroup]],
                          uint simd_group [[simdgroup_index_in_threadgroup]],
                          uint simd_groups [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[MAX_SIMD_GROUPS];
    uint key_width = p.n_k_head * p.k_dim;
    uint value_width = p.n_v_head * p.v_dim;
    uint channels = 2 * key_width + value_width;
    // The head's first channel of m, and where its values go.
    bool is_key = group < 2 * p.n_k_head;
    uint width = is_key ? p.k_dim : p.v_dim;
    uint first = is_key ? group * p.k_dim : 2 * key_width + (group - 2 * p.n_k_head) * p.v_dim;
    device float* dst = group < p.n_k_head ? q : (is_key ? k : v);
    uint dst_first = group < p.n_k_head ? first : (is_key ? first - key_width : first - 2 * key_width);
    uint dst_stride = is_key ? key_width : value_width;
    float scale = group < p.n_k_head ? p.q_scale : 1.0f;

    for (uint t = 0; t < p.rows; t++) {
        float y[CHANNELS_PER_THREAD];
        float squares = 0.0f;
        for (uint i = 0; i < CHANNELS_PER_THREAD; i++) {
            uint c = tid + i * threads;
            y[i] = c < width ? conv_silu(m, w, state, p.taps, channels, first + c, t) : 0.0f;
            squares += y[i] * y[i];
        }
        // Uniform per threadgroup: a head is all key or all value channels.
        float factor = 1.0f;
        if (is_key) {
            float total = threadgroup_sum(squares, partial, lane, simd_group, simd_groups);
            factor = scale / sqrt(total + p.eps);
        }
        for (uint i = 0; i < CHANNELS_PER_THREAD; i++) {
            uint c = tid + i * threads;
            if (c < width) {
                dst[t * dst_stride + dst_first + c] = y[i] * factor;
            }
        }
    }
    for (uint i = 0; i < CHANNELS_PER_THREAD; i++) {
        uint c = tid + i * threads;
        if (c < width) {
            conv_keep_state(m, state, p.taps, channels, p.rows, first + c);
        }
    }
}
