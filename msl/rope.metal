// NeoX RoPE on the first rot_dims of every head_dim group: dims i and i + rot_dims/2 rotate
// together by (pos0 + row) · base^(−2i/rot_dims); the other dims are copied.
#include <metal_stdlib>
using namespace metal;

struct RopeParams {
    uint n;
    uint cols;
    uint head_dim;
    uint rot_dims;
    uint pos0;
    float base;
};

kernel void rope(constant RopeParams& p [[buffer(0)]],
                 device const float* x [[buffer(1)]],
                 device float* out [[buffer(2)]],
                 uint e [[thread_position_in_grid]]) {
    if (e >= p.n) {
        return;
    }
    uint j = e % p.cols % p.head_dim;
    if (j >= p.rot_dims) {
        out[e] = x[e];
        return;
    }
    uint half_dims = p.rot_dims / 2;
    uint i = j % half_dims;
    // Precise functions: angles reach thousands of radians at long contexts.
    float inv_freq = 1.0f / precise::pow(p.base, float(2 * i) / float(p.rot_dims));
    float angle = float(p.pos0 + e / p.cols) * inv_freq;
    float s = precise::sin(angle);
    float c = precise::cos(angle);
    if (j < half_dims) {
        out[e] = x[e] * c - x[e + half_dims] * s;
    } else {
        out[e] = x[e] * c + x[e - half_dims] * s;
    }
}
