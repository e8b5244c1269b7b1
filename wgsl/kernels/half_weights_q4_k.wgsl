// Q4_K weight rows decoded into the f16 scratch matrix (half_scratch.wgsl) at memory speed, the
// same halves half_weights.wgsl would write. One invocation per 16 bytes of a super-block's
// nibbles (gemv_q4_k.wgsl's span): one load of the block's header and one of the nibbles, giving
// 16 values of sub-block 2c (low nibbles) and the same 16 columns of sub-block 2c+1 (high), 32
// columns further on. Consecutive invocations take consecutive pieces, so that their loads are
// neighbours and their two runs of 16 halves are too. The rows are whole super-blocks (144 =
// 9·16 bytes) and as wide as the scratch (a multiple of 256 columns).

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> halves: array<vec4<u32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let blocks = p.cols / 256u;
    let i = element_index(wid, nwg, lid);
    if (i >= p.padded_rows * blocks * 8u) {
        return;
    }
    let row = i / (blocks * 8u);
    let block = (i / 8u) % blocks;
    let piece = i % 8u;
    let c = piece / 2u;
    var low = array<vec4<u32>, 2>();
    var high = array<vec4<u32>, 2>();
    if (row < p.rows) {
        let v = (p.first_row + row) * p.row_bytes / 16u + block * 9u;
        let f = q4_k_span_factors(w[v], c);
        let q = w[v + 1u + piece];
        low[0] = clamped_halves(f.x * low_nibbles(q.x) - f.z, f.x * low_nibbles(q.y) - f.z);
        low[1] = clamped_halves(f.x * low_nibbles(q.z) - f.z, f.x * low_nibbles(q.w) - f.z);
        high[0] = clamped_halves(f.y * high_nibbles(q.x) - f.w, f.y * high_nibbles(q.y) - f.w);
        high[1] = clamped_halves(f.y * high_nibbles(q.z) - f.w, f.y * high_nibbles(q.w) - f.w);
    }
    // In vec4s of eight halves: sub-block 2c starts at column 64c, 2c+1 at 64c + 32.
    let out = (row * p.padded_cols + block * 256u + 64u * c + 16u * (piece % 2u)) / 8u;
    halves[out] = low[0];
    halves[out + 1u] = low[1];
    halves[out + 4u] = high[0];
    halves[out + 5u] = high[1];
}
