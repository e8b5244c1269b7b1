// Decode attention, second pass: per q head, the blocks of attention_blocks.metal merged as one
// softmax: M = max m_b, L = Σ l_b·exp(m_b − M), o = Σ exp(m_b − M)·acc_b / L. With `gated` the
// output is multiplied by sigmoid(gate), the gate being the second head_dim of the head's
// 2·head_dim group of the q projection; otherwise gate_src is unread. One threadgroup per head,
// a thread per dim.
#include <metal_stdlib>
using namespace metal;

struct AttentionCombineParams {
    uint head_dim;
    uint blocks;
    uint gated;
};

kernel void attention_combine(constant AttentionCombineParams& p [[buffer(0)]],
                              device const float* partials [[buffer(1)]],
                              device const float* gate_src [[buffer(2)]],
                              device float* out [[buffer(3)]],
                              uint head [[threadgroup_position_in_grid]],
                              uint d [[thread_index_in_threadgroup]]) {
    uint hd = p.head_dim;
    if (d >= hd) {
        return;
    }
    device const float* head_blocks = partials + head * p.blocks * (2 + hd);
    float overall_max = -INFINITY;
    for (uint b = 0; b < p.blocks; b++) {
        overall_max = max(overall_max, head_blocks[b * (2 + hd)]);
    }
    float total = 0.0f;
    float acc = 0.0f;
    for (uint b = 0; b < p.blocks; b++) {
        device const float* block = head_blocks + b * (2 + hd);
        float weight = exp(block[0] - overall_max);
        total += block[1] * weight;
        acc += block[2 + d] * weight;
    }
    float o = acc / total;
    if (p.gated != 0) {
        o *= 1.0f / (1.0f + exp(-gate_src[(2 * head + 1) * hd + d]));
    }
    out[head * hd + d] = o;
}
