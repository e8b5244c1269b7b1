// x ⊙ sigmoid(gate), elementwise: the output gate of full attention.
#include <metal_stdlib>
using namespace metal;

struct SigmoidMulParams {
    uint n;
};

kernel void sigmoid_mul(constant SigmoidMulParams& p [[buffer(0)]],
                        device const float* x [[buffer(1)]],
                        device const float* gate [[buffer(2)]],
                        device float* out [[buffer(3)]],
                        uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        out[i] = x[i] * (1.0f / (1.0f + exp(-gate[i])));
    }
}
