// Tiled GEMM in f32 for many tokens at once (prefill): 16 × 16 invocations per workgroup, each
// accumulating 4 × 4 results (tokens ty + 16i, weight rows tx + 16j, the four rows as one vec4)
// from the tiles that gemm_tiles.wgsl loads into workgroup memory. The tile rows are padded by one element so that
// the 16 invocations reading one weight column hit 16 different banks.

alias TileScalar = f32;

const SIDE: u32 = 16u;
const PER: u32 = 4u;
const THREADS: u32 = SIDE * SIDE;
const TILE_ROWS: u32 = SIDE * PER;
const TILE_TOKENS: u32 = SIDE * PER;
const DEPTH: u32 = 32u;
const TILE_STRIDE: u32 = DEPTH + 1u;

var<workgroup> w_tile: array<TileScalar, TILE_ROWS * TILE_STRIDE>;
var<workgroup> x_tile: array<TileScalar, TILE_TOKENS * TILE_STRIDE>;

fn to_tile(v: f32) -> TileScalar {
    return v;
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let origin = tile_origin(wid, nwg);
    // Uniform per workgroup: the whole workgroup leaves together, before any barrier.
    if (origin.y >= p.tokens) {
        return;
    }
    let tx = lid % SIDE;
    let ty = lid / SIDE;
    // acc[i][j]: token ty + SIDE·i, weight row tx + SIDE·j.
    var acc: array<vec4<f32>, PER>;
    for (var k0 = 0u; k0 < p.cols; k0 += DEPTH) {
        load_weight_tile(origin.x, k0, lid);
        load_x_tile(origin.y, k0, lid);
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
            store_result(origin.y + ty + SIDE * i, origin.x + tx + SIDE * j, acc[i][j]);
        }
    }
}
