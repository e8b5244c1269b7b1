// The GEMV's activations as they are: the token's row of x.
#include <metal_stdlib>
using namespace metal;

struct GemvInput {
    device const float* x;

    float4 x4(uint i) {
        return *(device const float4*)(x + i);
    }

    float x1(uint i) {
        return x[i];
    }

    float scale(constant GemvParams& p) {
        return 1.0f;
    }
};

// `other` is unread.
inline GemvInput gemv_input(constant GemvParams& p, device const float* x,
                            device const float* other, uint token) {
    return GemvInput{x + token * p.cols};
}
