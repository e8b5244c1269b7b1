// Tiled GEMM in f32 for many tokens at once (prefill): y[t, out_offset + r] = Σ_c W[r, c]·x[t, c]
// for the rows of one weight part, one workgroup per tile of 64 tokens × 64 weight rows, stepping
// through the columns DEPTH at a time. Each step decodes the weight tile into workgroup memory,
// so that every weight element is decoded once per tile instead of once per token, and copies the
// x tile beside it; then each of the 16 × 16 invocations accumulates 4 × 4 results (tokens
// ty + 16i, weight rows tx + 16j, the four rows as one vec4). Weight rows past the part, tokens
// past the last and columns past the row read as zero, so any size works. The tile rows are
// padded by one element so that the 16 invocations reading one weight column hit 16 different
// banks. The weight format comes from the dequant_*.wgsl file composed with this one (UNIT
// elements per `unit_values` call; DEPTH is a multiple of it).

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

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const SIDE: u32 = 16u;
const PER: u32 = 4u;
const THREADS: u32 = SIDE * SIDE;
const TILE: u32 = SIDE * PER;
const DEPTH: u32 = 32u;
const TILE_STRIDE: u32 = DEPTH + 1u;

var<workgroup> w_tile: array<f32, TILE * TILE_STRIDE>;
var<workgroup> x_tile: array<f32, TILE * TILE_STRIDE>;

// Columns k0..k0+DEPTH of weight rows first_row.. into w_tile, one decoder unit per invocation.
fn load_weight_tile(first_row: u32, k0: u32, lid: u32) {
    let units = DEPTH / UNIT;
    for (var i = lid; i < TILE * units; i += THREADS) {
        let r = i / units;
        let u = i % units;
        let col = k0 + u * UNIT;
        var values: array<f32, UNIT>;
        if (first_row + r < p.rows && col < p.cols) {
            values = unit_values((first_row + r) * p.row_bytes, col / UNIT);
        }
        let at = r * TILE_STRIDE + u * UNIT;
        for (var l = 0u; l < UNIT; l++) {
            w_tile[at + l] = values[l];
        }
    }
}

// Columns k0..k0+DEPTH of x rows first_token.. into x_tile.
fn load_x_tile(first_token: u32, k0: u32, lid: u32) {
    for (var i = lid; i < TILE * DEPTH; i += THREADS) {
        let t = i / DEPTH;
        let c = i % DEPTH;
        var v = 0.0;
        if (first_token + t < p.tokens && k0 + c < p.cols) {
            v = x[(first_token + t) * p.cols + k0 + c];
        }
        x_tile[t * TILE_STRIDE + c] = v;
    }
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Weight tiles vary fastest, so that neighbouring workgroups share the x tile in cache.
    let id = workgroup_index(wid, nwg);
    let first_row = (id % p.row_tiles) * TILE;
    let first_token = (id / p.row_tiles) * TILE;
    // Uniform per workgroup: the whole workgroup leaves together, before any barrier.
    if (first_token >= p.tokens) {
        return;
    }
    let tx = lid % SIDE;
    let ty = lid / SIDE;
    var acc: array<vec4<f32>, PER>;
    for (var k0 = 0u; k0 < p.cols; k0 += DEPTH) {
        load_weight_tile(first_row, k0, lid);
        load_x_tile(first_token, k0, lid);
        workgroupBarrier();
        for (var k = 0u; k < DEPTH; k++) {
            let b = vec4<f32>(
                w_tile[tx * TILE_STRIDE + k],
                w_tile[(tx + SIDE) * TILE_STRIDE + k],
                w_tile[(tx + 2u * SIDE) * TILE_STRIDE + k],
                w_tile[(tx + 3u * SIDE) * TILE_STRIDE + k],
            );
            for (var i = 0u; i < PER; i++) {
                acc[i] += x_tile[(ty + SIDE * i) * TILE_STRIDE + k] * b;
            }
        }
        // The next step overwrites the tiles.
        workgroupBarrier();
    }
    for (var i = 0u; i < PER; i++) {
        for (var j = 0u; j < PER; j++) {
            let t = first_token + ty + SIDE * i;
            let r = first_row + tx + SIDE * j;
            if (t < p.tokens && r < p.rows) {
                y[t * p.out_cols + p.out_offset + r] = acc[i][j];
            }
        }
    }
}
