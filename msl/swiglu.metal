// silu(gate) ⊙ up, elementwise.
#include <metal_stdlib>
using namespace metal;

struct SwigluParams {
    uint n;
};

kernel void swiglu(constant SwigluParams& p [[buffer(0)]],
                   device const float* gate [[buffer(1)]],
                   device const float* up [[buffer(2)]],
                   device float* out [[buffer(3)]],
                   uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        float g = gate[i];
        out[i] = g / (1.0f + exp(-g)) * up[i];
    }
}
