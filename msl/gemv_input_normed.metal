// The GEMV's activations RMS-normed as they are loaded: x ⊙ norm here, and 1/rms(x), the same for
// every output, applied to the sums at the end. Σx² is gathered from the loads the dot products
// make anyway: a SIMD-group reads each column of the row once (gemv_common.metal), so one simd_sum
// finishes it and the norm costs no pass, dispatch or threadgroup memory of its own.
#include <metal_stdlib>
using namespace metal;

struct GemvInput {
    device const float* x;
    device const float* norm;
    // This lane's share of Σx².
    float squares;

    float4 x4(uint i) {
        float4 v = *(device const float4*)(x + i);
        squares += dot(v, v);
        return v * *(device const float4*)(norm + i);
    }

    float x1(uint i) {
        float v = x[i];
        squares += v * v;
        return v * norm[i];
    }

    // 1 / sqrt(mean(x²) + eps); every lane of the SIMD-group must call it, after its last load.
    float scale(constant GemvParams& p) {
        return 1.0f / sqrt(simd_sum(squares) / float(p.cols) + p.eps);
    }
};

// `other` is the norm's weight row.
inline GemvInput gemv_input(constant GemvParams& p, device const float* x,
                            device const float* other, uint token) {
    return GemvInput{x + token * p.cols, other, 0.0f};
}
