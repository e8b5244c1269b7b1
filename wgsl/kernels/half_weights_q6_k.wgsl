// Q6_K weight rows decoded into the f16 scratch matrix (half_scratch.wgsl) at memory speed, the
// same halves half_weights.wgsl would write. One invocation per 16 bytes l0..l0+16 (l0 = 0 or
// 16) of half n of a super-block (q6_k_span.wgsl): whole words of both nibble runs and of the bit
// pairs, the block's d and scales read once, giving 16 values of each of the half's four
// 32-element parts. Consecutive invocations take consecutive pieces, so that their loads are
// neighbours and their runs of 16 halves are too. The rows are as wide as the scratch (a multiple
// of 256 columns).

@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> halves: array<vec4<u32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let blocks = p.cols / 256u;
    let i = element_index(wid, nwg, lid);
    if (i >= p.padded_rows * blocks * 4u) {
        return;
    }
    let row = i / (blocks * 4u);
    let block = (i / 4u) % blocks;
    let n = (i % 4u) / 2u;
    let l0 = 16u * (i % 2u);
    // Two vec4s of eight halves for each part.
    var runs = array<vec4<u32>, 8>();
    if (row < p.rows) {
        let span = q6_k_span((p.first_row + row) * p.row_bytes, block, n, l0);
        // (d·scale)·(q − 32), grouped as half_weights.wgsl's decoder groups it.
        let f = span.d * span.scales;
        for (var k = 0u; k < 2u; k++) {
            let first0 = q6_k_word(span.ql + 8u * k);
            let first1 = q6_k_word(span.ql + 8u * k + 4u);
            let second0 = q6_k_word(span.ql + 32u + 8u * k);
            let second1 = q6_k_word(span.ql + 36u + 8u * k);
            let high0 = q6_k_word(span.qh + 8u * k);
            let high1 = q6_k_word(span.qh + 8u * k + 4u);
            runs[k] = clamped_halves(
                f.x * (six_bits(first0, high0) - 32.0),
                f.x * (six_bits(first1, high1) - 32.0),
            );
            runs[2u + k] = clamped_halves(
                f.y * (six_bits(second0, high0 >> 2u) - 32.0),
                f.y * (six_bits(second1, high1 >> 2u) - 32.0),
            );
            runs[4u + k] = clamped_halves(
                f.z * (six_bits(first0 >> 4u, high0 >> 4u) - 32.0),
                f.z * (six_bits(first1 >> 4u, high1 >> 4u) - 32.0),
            );
            runs[6u + k] = clamped_halves(
                f.w * (six_bits(second0 >> 4u, high0 >> 6u) - 32.0),
                f.w * (six_bits(second1 >> 4u, high1 >> 6u) - 32.0),
            );
        }
    }
    // In vec4s of eight halves: part q of the half starts at column 128n + 32q.
    let out = (row * p.padded_cols + block * 256u + 128u * n + l0) / 8u;
    for (var part = 0u; part < 4u; part++) {
        halves[out + 4u * part] = runs[2u * part];
        halves[out + 4u * part + 1u] = runs[2u * part + 1u];
    }
}
