// The GEMV's activations as the SwiGLU MLP's down projection takes them: silu(gate) ⊙ up, x being
// the gate projection and `other` up, computed as they are loaded so that the product never goes
// to memory.
#include <metal_stdlib>
using namespace metal;

struct GemvInput {
    device const float* gate;
    device const float* up;

    float4 x4(uint i) {
        float4 g = *(device const float4*)(gate + i);
        return g / (1.0f + exp(-g)) * *(device const float4*)(up + i);
    }

    float x1(uint i) {
        float g = gate[i];
        return g / (1.0f + exp(-g)) * up[i];
    }

    float scale(constant GemvParams& p) {
        return 1.0f;
    }
};

inline GemvInput gemv_input(constant GemvParams& p, device const float* x,
                            device const float* other, uint token) {
    return GemvInput{x + token * p.cols, other + token * p.cols};
}
