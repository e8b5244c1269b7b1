// The f16 scratch matrix of the cooperative GEMM that the half_weights*.wgsl kernels fill from
// weight rows first_row.. of one part: `padded_rows` rows of `padded_cols` halves, packed two to
// a word; the rows past `rows` and the columns past `cols` are zeros, so that the GEMM reads whole
// tiles without bounds checks. Values are clamped to the f16 range (clamped_halves.wgsl).

struct Params {
    rows: u32,
    cols: u32,
    row_bytes: u32,
    first_row: u32,
    padded_rows: u32,
    padded_cols: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
