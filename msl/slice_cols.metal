// In each group of `group` columns, the columns offset..offset+width, concatenated.
#include <metal_stdlib>
using namespace metal;

struct SliceColsParams {
    uint n;
    uint group;
    uint offset;
    uint width;
};

kernel void slice_cols(constant SliceColsParams& p [[buffer(0)]],
                       device const float* x [[buffer(1)]],
                       device float* out [[buffer(2)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        out[i] = x[i / p.width * p.group + p.offset + i % p.width];
    }
}
