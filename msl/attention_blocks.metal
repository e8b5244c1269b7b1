// Decode attention, first pass: one query row at position pos0, the cache split into blocks of
// BLOCK_ROWS rows so that a long context keeps many threadgroups busy (attention_combine.metal
// merges the blocks). One threadgroup per (q head, block): each SIMD-group runs an online softmax
// over every SIMD_GROUPS-th key of the block with its lanes splitting the head dims, and the
// SIMD-groups merge through threadgroup memory into the block's maximum score m, Σ exp(s − m) and
// Σ exp(s − m)·v. This call's k and v (row pos0) are read from k and v, and written to the caches
// by block 0 of each kv head's first q head; nothing reads that row from the caches here. The
// caches hold KvValue (kv_cache_*.metal: f16 or f32); the sums are f32.
#include <metal_stdlib>
using namespace metal;

struct AttentionBlocksParams {
    uint n_head;
    uint n_kv_head;
    uint head_dim;
    uint pos0;
    uint kv_cols;
    uint blocks;
    float scale;
};

// 256 threads per threadgroup (the host's launch plan); blocks of BLOCK_ROWS keys (the host's
// ATTENTION_BLOCK_ROWS).
constant uint SIMD_GROUPS = 8;
constant uint BLOCK_ROWS = 128;
constant uint MAX_HEAD_DIM = 256;
constant uint DIMS_PER_LANE = MAX_HEAD_DIM / 32;

kernel void attention_blocks(constant AttentionBlocksParams& p [[buffer(0)]],
                             device const float* q [[buffer(1)]],
                             device const float* k [[buffer(2)]],
                             device const float* v [[buffer(3)]],
                             device KvValue* k_cache [[buffer(4)]],
                             device KvValue* v_cache [[buffer(5)]],
                             device float* partials [[buffer(6)]],
                             uint group [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]],
                             uint lane [[thread_index_in_simdgroup]],
                             uint simd_group [[simdgroup_index_in_threadgroup]]) {
    threadgroup float partial_max[SIMD_GROUPS];
    threadgroup float partial_sum[SIMD_GROUPS];
    threadgroup float partial_out[SIMD_GROUPS][MAX_HEAD_DIM];

    uint head = group / p.blocks;
    uint block = group % p.blocks;
    uint heads_per_kv = p.n_head / p.n_kv_head;
    uint kv_at = (head / heads_per_kv) * p.head_dim;
    uint hd = p.head_dim;

    if (block == 0 && head % heads_per_kv == 0) {
        for (uint d = tid; d < hd; d += SIMD_GROUPS * 32) {
            k_cache[p.pos0 * p.kv_cols + kv_at + d] = KvValue(clamp(k[kv_at + d], -KV_MAX, KV_MAX));
            v_cache[p.pos0 * p.kv_cols + kv_at + d] = KvValue(clamp(v[kv_at + d], -KV_MAX, KV_MAX));
        }
    }

    device const float* qh = q + head * hd;
    float qv[DIMS_PER_LANE];
    float o[DIMS_PER_LANE];
    for (uint c = 0; c < DIMS_PER_LANE; c++) {
        uint d = lane + 32 * c;
        qv[c] = d < hd ? qh[d] : 0.0f;
        o[c] = 0.0f;
    }
    uint first = block * BLOCK_ROWS;
    uint end = min(first + BLOCK_ROWS, p.pos0 + 1);
    float running_max = -INFINITY;
    float running_sum = 0.0f;
    for (uint j = first + simd_group; j < end; j += SIMD_GROUPS) {
        // Row j from the caches, or this call's row from k and v.
        bool cached = j < p.pos0;
        device const KvValue* kj = k_cache + j * p.kv_cols + kv_at;
        device const KvValue* vj = v_cache + j * p.kv_cols + kv_at;
        float dot = 0.0f;
        for (uint c = 0; c < DIMS_PER_LANE; c++) {
            uint d = lane + 32 * c;
            if (d < hd) {
                dot += qv[c] * (cached ? float(kj[d]) : k[kv_at + d]);
            }
        }
        float score = simd_sum(dot) * p.scale;
        float new_max = max(running_max, score);
        float rescale = exp(running_max - new_max);
        float weight = exp(score - new_max);
        running_sum = running_sum * rescale + weight;
        for (uint c = 0; c < DIMS_PER_LANE; c++) {
            uint d = lane + 32 * c;
            float vd = d < hd ? (cached ? float(vj[d]) : v[kv_at + d]) : 0.0f;
            o[c] = o[c] * rescale + weight * vd;
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

    // Every block holds a key, so the maximum is finite; SIMD-groups that saw none hold −∞ and
    // weigh nothing.
    float block_max = -INFINITY;
    for (uint s = 0; s < SIMD_GROUPS; s++) {
        block_max = max(block_max, partial_max[s]);
    }
    device float* result = partials + group * (2 + hd);
    if (tid == 0) {
        float total = 0.0f;
        for (uint s = 0; s < SIMD_GROUPS; s++) {
            total += partial_sum[s] * exp(partial_max[s] - block_max);
        }
        result[0] = block_max;
        result[1] = total;
    }
    for (uint d = tid; d < hd; d += SIMD_GROUPS * 32) {
        float acc = 0.0f;
        for (uint s = 0; s < SIMD_GROUPS; s++) {
            acc += partial_out[s][d] * exp(partial_max[s] - block_max);
        }
        result[2 + d] = acc;
    }
}
