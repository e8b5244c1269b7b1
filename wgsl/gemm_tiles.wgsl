// What the GEMM kernels share: y[t, out_offset + r] = Σ_c W[r, c]·x[t, c] for the rows of one
// weight part, one workgroup per tile of TILE_TOKENS tokens × TILE_ROWS weight rows, stepping
// through the columns DEPTH at a time. Each step decodes the weight tile into `w_tile` and copies
// the x tile into `x_tile` (both row-major with TILE_STRIDE elements per row, of the kernel's
// `TileScalar` type, written by its `to_tile`), so that every weight element is decoded once per
// tile instead of once per token. Weight rows past the part, tokens past the last and columns
// past the row read as zero, so any size works. The weight format comes from the dequant_*.wgsl
// file composed with this one (UNIT elements per `unit_values` call; DEPTH is a multiple of it).

struct Params {
    rows: u32,
    cols: u32,
    tokens: u32,
    row_bytes: u32,
    out_cols: u32,
    out_offset: u32,
    row_tiles: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// The tile's first weight row and first token: weight tiles vary fastest, so that neighbouring
// workgroups share the x tile while it is in cache.
fn tile_origin(wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
    let id = workgroup_index(wid, nwg);
    return vec2<u32>((id % p.row_tiles) * TILE_ROWS, (id / p.row_tiles) * TILE_TOKENS);
}

// Columns k0..k0+DEPTH of weight rows first_row.. into w_tile, one decoder unit per invocation.
fn load_weight_tile(first_row: u32, k0: u32, lid: u32) {
    let units = DEPTH / UNIT;
    for (var i = lid; i < TILE_ROWS * units; i += THREADS) {
        let r = i / units;
        let u = i % units;
        let col = k0 + u * UNIT;
        var values: array<f32, UNIT>;
        if (first_row + r < p.rows && col < p.cols) {
            values = unit_values((first_row + r) * p.row_bytes, col / UNIT);
        }
        let at = r * TILE_STRIDE + u * UNIT;
        for (var l = 0u; l < UNIT; l++) {
            w_tile[at + l] = to_tile(values[l]);
        }
    }
}

// Columns k0..k0+DEPTH of x rows first_token.. into x_tile.
fn load_x_tile(first_token: u32, k0: u32, lid: u32) {
    for (var i = lid; i < TILE_TOKENS * DEPTH; i += THREADS) {
        let t = i / DEPTH;
        let c = i % DEPTH;
        var v = 0.0;
        if (first_token + t < p.tokens && k0 + c < p.cols) {
            v = x[(first_token + t) * p.cols + k0 + c];
        }
        x_tile[t * TILE_STRIDE + c] = to_tile(v);
    }
}

// Writes one result when its token and row exist.
fn store_result(token: u32, row: u32, value: f32) {
    if (token < p.tokens && row < p.rows) {
        y[token * p.out_cols + p.out_offset + row] = value;
    }
}
