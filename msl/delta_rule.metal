// The gated delta rule (QWEN35.md §5.4), token by token over the rows, on the f32 state of each
// value head (k_dim × v_dim, key index major). A threadgroup owns 32 state columns of one head:
// its lanes take one column each (consecutive addresses: coalesced), its 8 SIMD-groups each a
// slice of the key rows, held in registers across all rows of the call. Column sums over the
// key rows (Sᵀk and Sᵀq) add the 8 slices' partial sums through threadgroup memory.
// With raw_gates the gates are computed here from the projections as delta_net_gates.metal does
// (softplus.metal comes first): g holds alpha, beta the raw beta, and ssm_a, dt_bias are read.
#include <metal_stdlib>
using namespace metal;

struct DeltaRuleParams {
    uint n_k_head;
    uint n_v_head;
    uint k_dim;
    uint v_dim;
    uint rows;
    uint column_tiles;
    uint raw_gates;
};

// 256 threads per threadgroup (the host's launch plan): 8 slices of 32 columns.
constant uint COLUMNS = 32;
constant uint KEY_SLICES = 8;
constant uint MAX_K_DIM = 256;
constant uint MAX_KEYS_PER_SLICE = MAX_K_DIM / KEY_SLICES;

// The sum over the key slices of each column's partial sum; every thread gets its column's.
inline float sum_slices(float value, threadgroup float (*partial)[COLUMNS], uint slice,
                        uint column) {
    partial[slice][column] = value;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = 0.0f;
    for (uint s = 0; s < KEY_SLICES; s++) {
        total += partial[s][column];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return total;
}

kernel void delta_rule(constant DeltaRuleParams& p [[buffer(0)]],
                       device const float* q [[buffer(1)]],
                       device const float* k [[buffer(2)]],
                       device const float* v [[buffer(3)]],
                       device const float* g [[buffer(4)]],
                       device const float* beta [[buffer(5)]],
                       device float* state [[buffer(6)]],
                       device float* out [[buffer(7)]],
                       device const float* ssm_a [[buffer(8)]],
                       device const float* dt_bias [[buffer(9)]],
                       uint group [[threadgroup_position_in_grid]],
                       uint lane [[thread_index_in_simdgroup]],
                       uint slice [[simdgroup_index_in_threadgroup]]) {
    threadgroup float partial[KEY_SLICES][COLUMNS];
    uint head = group / p.column_tiles;
    uint column = (group % p.column_tiles) * COLUMNS + lane;
    bool live = column < p.v_dim;
    uint k_head = head % p.n_k_head;
    uint keys_per_slice = (p.k_dim + KEY_SLICES - 1) / KEY_SLICES;
    uint first_key = slice * keys_per_slice;
    uint keys = first_key < p.k_dim ? min(keys_per_slice, p.k_dim - first_key) : 0;

    device float* s_column = state + head * p.k_dim * p.v_dim + column;
    float s[MAX_KEYS_PER_SLICE];
    for (uint m = 0; m < keys; m++) {
        s[m] = live ? s_column[(first_key + m) * p.v_dim] : 0.0f;
    }
    uint qk_stride = p.n_k_head * p.k_dim;
    uint v_stride = p.n_v_head * p.v_dim;
    for (uint t = 0; t < p.rows; t++) {
        device const float* kt = k + t * qk_stride + k_head * p.k_dim + first_key;
        device const float* qt = q + t * qk_stride + k_head * p.k_dim + first_key;
        float gate = g[t * p.n_v_head + head];
        float strength = beta[t * p.n_v_head + head];
        if (p.raw_gates != 0) {
            gate = ssm_a[head] * softplus(gate + dt_bias[head]);
            strength = 1.0f / (1.0f + exp(-strength));
        }
        float decay = exp(gate);
        // Decay the state and recall what it holds for k: r = Sᵀk.
        float recall = 0.0f;
        for (uint m = 0; m < keys; m++) {
            s[m] *= decay;
            recall += s[m] * kt[m];
        }
        recall = sum_slices(recall, partial, slice, column % COLUMNS);
        float target = live ? v[t * v_stride + head * p.v_dim + column] : 0.0f;
        float delta = strength * (target - recall);
        // Write k ⊗ δ and read o = Sᵀq.
        float o = 0.0f;
        for (uint m = 0; m < keys; m++) {
            s[m] += kt[m] * delta;
            o += s[m] * qt[m];
        }
        o = sum_slices(o, partial, slice, column % COLUMNS);
        if (slice == 0 && live) {
            out[t * v_stride + head * p.v_dim + column] = o;
        }
    }
    if (live) {
        for (uint m = 0; m < keys; m++) {
            s_column[(first_key + m) * p.v_dim] = s[m];
        }
    }
}
