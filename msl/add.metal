// x += y, elementwise.
#include <metal_stdlib>
using namespace metal;

struct AddParams {
    uint n;
};

kernel void add(constant AddParams& p [[buffer(0)]],
                device float* x [[buffer(1)]],
                device const float* y [[buffer(2)]],
                uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        x[i] += y[i];
    }
}
