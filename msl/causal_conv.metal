// The Gated DeltaNet's causal depthwise conv + SiLU, per channel: taps over the carried inputs
// (state, taps − 1 rows, oldest first) followed by this call's rows; the state then keeps the
// last taps − 1 inputs. A channel's state is read and rewritten by one thread only.
#include <metal_stdlib>
using namespace metal;

constant uint MAX_TAPS = 8;

// Input i of channel c's history: the carried state rows first, then x.
inline float history(device const float* state, device const float* x, uint carried,
                     uint channels, uint c, uint i) {
    return i < carried ? state[i * channels + c] : x[(i - carried) * channels + c];
}

// silu of the conv of channel c at row t of x.
inline float conv_silu(device const float* x, device const float* w, device const float* state,
                       uint taps, uint channels, uint c, uint t) {
    float sum = 0.0f;
    for (uint k = 0; k < taps; k++) {
        sum += w[c * taps + k] * history(state, x, taps - 1, channels, c, t + k);
    }
    return sum / (1.0f + exp(-sum));
}

// After `rows` rows of x: channel c's state keeps its last taps − 1 inputs.
inline void conv_keep_state(device const float* x, device float* state, uint taps, uint channels,
                            uint rows, uint c) {
    uint carried = taps - 1;
    float keep[MAX_TAPS];
    for (uint i = 0; i < carried; i++) {
        keep[i] = history(state, x, carried, channels, c, rows + i);
    }
    for (uint i = 0; i < carried; i++) {
        state[i * channels + c] = keep[i];
    }
}
