// The Gated DeltaNet's causal depthwise conv + SiLU: per channel, taps over the carried inputs
// (state, oldest first) followed by this call's rows; the state then keeps the last taps − 1
// inputs. One thread per channel, so state rows are read and rewritten by their own thread.
#include <metal_stdlib>
using namespace metal;

struct Conv1dSiluParams {
    uint channels;
    uint taps;
    uint rows;
};

constant uint MAX_TAPS = 8;

// Input i of channel c's history: the carried state rows first, then x.
inline float history(device const float* state, device const float* x, uint carried,
                     uint channels, uint c, uint i) {
    return i < carried ? state[i * channels + c] : x[(i - carried) * channels + c];
}

kernel void conv1d_silu(constant Conv1dSiluParams& p [[buffer(0)]],
                        device const float* x [[buffer(1)]],
                        device const float* w [[buffer(2)]],
                        device float* state [[buffer(3)]],
                        device float* out [[buffer(4)]],
                        uint c [[thread_position_in_grid]]) {
    if (c >= p.channels) {
        return;
    }
    uint carried = p.taps - 1;
    for (uint t = 0; t < p.rows; t++) {
        float sum = 0.0f;
        for (uint k = 0; k < p.taps; k++) {
            sum += w[c * p.taps + k] * history(state, x, carried, p.channels, c, t + k);
        }
        out[t * p.channels + c] = sum / (1.0f + exp(-sum));
    }
    float keep[MAX_TAPS];
    for (uint i = 0; i < carried; i++) {
        keep[i] = history(state, x, carried, p.channels, c, p.rows + i);
    }
    for (uint i = 0; i < carried; i++) {
        state[i * p.channels + c] = keep[i];
    }
}
