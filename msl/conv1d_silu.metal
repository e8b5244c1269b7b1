// The Gated DeltaNet's causal depthwise conv + SiLU (causal_conv.metal), one thread per channel.
#include <metal_stdlib>
using namespace metal;

struct Conv1dSiluParams {
    uint channels;
    uint taps;
    uint rows;
};

kernel void conv1d_silu(constant Conv1dSiluParams& p [[buffer(0)]],
                        device const float* x [[buffer(1)]],
                        device const float* w [[buffer(2)]],
                        device float* state [[buffer(3)]],
                        device float* out [[buffer(4)]],
                        uint c [[thread_position_in_grid]]) {
    if (c >= p.channels) {
        return;
    }
    for (uint t = 0; t < p.rows; t++) {
        out[t * p.channels + c] = conv_silu(x, w, state, p.taps, p.channels, c, t);
    }
    conv_keep_state(x, state, p.taps, p.channels, p.rows, c);
}
