// What every GEMV kernel shares: y = x · Wᵀ for the rows of one part of a weight (a weight larger
// than one binding is split into row ranges), each SIMD-group taking a few consecutive rows with
// its lanes splitting the columns, and one simd_sum per row at the end. As on Apple GPUs generally,
// no threadgroup memory: activations are read straight from device memory into registers and
// reused for all the SIMD-group's rows. The activations come through a `GemvInput`, which a GEMV
// input file (gemv_input_*.metal) after this one defines: `x4(i)` / `x(i)` give the input at
// column i of the token's row and `scale(p)` a factor for the sums. Each format's kernel reads
// every column of the row exactly once per SIMD-group (outside its loop over rows), which the
// RMS-normed input counts on.
#include <metal_stdlib>
using namespace metal;

struct GemvParams {
    // Weight rows in this part.
    uint rows;
    uint cols;
    uint row_bytes;
    // Output values per token (rows of the whole weight), and where this part's rows start.
    uint out_cols;
    uint first_row;
    // Threadgroups per token.
    uint row_groups;
    // Non-zero: add to the output (a projection into the residual stream) instead of writing it.
    uint accumulate;
    // Of an RMS-normed input (gemv_input_normed.metal).
    float eps;
};

// The token and first weight row of one SIMD-group taking `rows_per_simd_group` rows.
struct GemvTile {
    uint token;
    uint first;
};

inline GemvTile gemv_tile(constant GemvParams& p, uint group, uint simd_group, uint simd_groups,
                          uint rows_per_simd_group) {
    GemvTile tile;
    tile.token = group / p.row_groups;
    tile.first = ((group % p.row_groups) * simd_groups + simd_group) * rows_per_simd_group;
    return tile;
}

// The start of weight row `row` of this part.
inline device const uchar* gemv_row(device const uchar* w, constant GemvParams& p, uint row) {
    return w + row * p.row_bytes;
}

// Adds up each row's lane partials, times the input's `scale`, and writes (or adds to the
// output) the rows this part has.
template <uint ROWS>
inline void gemv_store(constant GemvParams& p, thread const float* acc, GemvTile tile, uint lane,
                       device float* out, float scale) {
    for (uint r = 0; r < ROWS; r++) {
        float total = simd_sum(acc[r]) * scale;
        if (lane == 0 && tile.first + r < p.rows) {
            device float* y = out + tile.token * p.out_cols + p.first_row + tile.first + r;
            *y = p.accumulate != 0 ? *y + total : total;
        }
    }
}
