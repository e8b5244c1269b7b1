// The GEMV's activations as the SwiGLU MLP's down projection takes them: silu(x) ⊙ up, x being
// the gate projection, computed as they are loaded so that the product never goes to memory.
#include <metal_stdlib>
using namespace metal;

inline float4 gemv_x4(device const float* x, device const float* up, uint i) {
    float4 gate = *(device const float4*)(x + i);
    return gate / (1.0f + exp(-gate)) * *(device const float4*)(up + i);
}

inline float gemv_x(device const float* x, device const float* up, uint i) {
    float gate = x[i];
    return gate / (1.0f + exp(-gate)) * up[i];
}
