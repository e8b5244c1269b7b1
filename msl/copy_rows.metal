// n consecutive values from src[src_offset..] to dst[dst_offset..].
#include <metal_stdlib>
using namespace metal;

struct CopyRowsParams {
    uint n;
    uint src_offset;
    uint dst_offset;
};

kernel void copy_rows(constant CopyRowsParams& p [[buffer(0)]],
                      device const float* src [[buffer(1)]],
                      device float* dst [[buffer(2)]],
                      uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        dst[p.dst_offset + i] = src[p.src_offset + i];
    }
}
