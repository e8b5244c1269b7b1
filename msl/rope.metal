// NeoX RoPE (rope_angle.metal) on the first rot_dims of every head_dim group, row r at position
// pos0 + r; the other dims are copied.
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
    float partner = j < half_dims ? x[e + half_dims] : x[e - half_dims];
    out[e] = rope_rotate(x[e], partner, j, p.rot_dims, p.pos0 + e / p.cols, p.base);
}
