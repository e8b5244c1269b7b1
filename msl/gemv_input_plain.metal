// The GEMV's activations as they are: x; `up` is unread.
#include <metal_stdlib>
using namespace metal;

inline float4 gemv_x4(device const float* x, device const float* up, uint i) {
    return *(device const float4*)(x + i);
}

inline float gemv_x(device const float* x, device const float* up, uint i) {
    return x[i];
}
