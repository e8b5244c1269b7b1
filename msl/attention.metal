// Causal GQA attention for query rows at positions pos0.., one threadgroup per (row, q head):
// the row's k and v go into the caches, and each SIMD-group runs an online softmax over every
// SIMD_GROUPS-th key with its lanes splitting the head dims; the SIMD-groups' partial results
// are merged through threadgroup memory. Keys of this call's rows are read from k and v, not
// from the caches, so no threadgroup reads what another one writes.
#include <metal_stdlib>
using namespace metal;

struct AttentionParams {
    uint n_head;
    uint n_kv_head;
    uint head_dim;
    uint pos0;
    uint kv_cols;
    float scale;
};

// 256 threads per threadgroup (the host's launch plan).
constant uint SIMD_GROUPS = 8;
constant uint MAX_HEAD_DIM = 256;
constant uint DIMS_PER_LANE = MAX_HEAD_DIM / 32;

kernel void attention(constant AttentionParams& p [[buffer(0)]],
                      device const float* q [[buffer(1)]],
                      device const float* k [[buffer(2)]],
                      device const float* v [[buffer(3)]],
                      device float* k_cache [[buffer(4)]],
                      device float* v_cache [[buffer(5)]],
                      device float* out [[buffer(6)]],
                      uint group [[threadgroup_position_in_grid]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint simd_group [[simdgroup_index_in_threadgroup]]) {
    threadgroup float partial_max[SIMD_GROUPS];
    threadgroup float partial_sum[SIMD_GROUPS];
    threadgroup float partial_out[SIMD_GROUPS][MAX_HEAD_DIM];

    uint row = group / p.n_head;
    uint head = group % p.n_head;
    uint heads_per_kv = p.n_head / p.n_kv_head;
    uint kv_at = (head / heads_per_kv) * p.head_dim;
    uint hd = p.head_dim;
    uint pos = p.pos0 + row;

    // The first q head of each kv group appends this row's key and value.
    if (head % heads_per_kv == 0) {
        for (uint d = tid; d < hd; d += SIMD_GROUPS * 32) {
            k_cache[pos * p.kv_cols + kv_at + d] = k[row * p.kv_cols + kv_at + d];
            v_cache[pos * p.kv_cols + kv_at + d] = v[row * p.kv_cols + kv_at + d];
        }
    }

    device const float* qh = q + (row * p.n_head + head) * hd;
    float qv[DIMS_PER_LANE];
    float o[DIMS_PER_LANE];
    for (uint c = 0; c < DIMS_PER_LANE; c++) {
        uint d = lane + 32 * c;
        qv[c] = d < hd ? qh[d] : 0.0f;
        o[c] = 0.0f;
    }
    float running_max = -INFINITY;
    float running_sum = 0.0f;
    for (uint j = simd_group; j <= pos; j += SIMD_GROUPS) {
        bool cached = j < p.pos0;
        device const float* kj = cached ? k_cache + j * p.kv_cols : k + (j - p.pos0) * p.kv_cols;
        device const float* vj = cached ? v_cache + j * p.kv_cols : v + (j - p.pos0) * p.kv_cols;
        float dot = 0.0f;
        for (uint c = 0; c < DIMS_PER_LANE; c++) {
            uint d = lane + 32 * c;
            if (d < hd) {
                dot += qv[c] * kj[kv_at + d];
            }
        }
        float score = simd_sum(dot) * p.scale;
        float new_max = max(running_max, score);
        float rescale = exp(running_max - new_max);
        float weight = exp(score - new_max);
        running_sum = running_sum * rescale + weight;
        for (uint c = 0; c < DIMS_PER_LANE; c++) {
            uint d = lane + 32 * c;
            o[c] = o[c] * rescale + (d < hd ? weight * vj[kv_at + d] : 0.0f);
        }
        running_max = new_max;
    }

    if (lane == 0) {
        partial_max[simd_group] = running_max;
        partial_sum[simd_group] = running_sum;
    }
    for (uint c = 0; c < DIMS_PER_LANE; c++) {
        uint d = lane + 32 * c;
        if (d < hd) {
            partial_out[simd_group][d] = o[c];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // SIMD-groups that saw no key hold −∞ and weigh nothing.
    float overall_max = -INFINITY;
    for (uint s = 0; s < SIMD_GROUPS; s++) {
        overall_max = max(overall_max, partial_max[s]);
    }
    float total = 0.0f;
    for (uint s = 0; s < SIMD_GROUPS; s++) {
        total += partial_sum[s] * exp(partial_max[s] - overall_max);
    }
    for (uint d = tid; d < hd; d += SIMD_GROUPS * 32) {
        float acc = 0.0f;
        for (uint s = 0; s < SIMD_GROUPS; s++) {
            acc += partial_out[s][d] * exp(partial_max[s] - overall_max);
        }
        out[(row * p.n_head + head) * hd + d] = acc / total;
    }
}
