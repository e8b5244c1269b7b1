// y = Σ_s parts[s]: the partial sums of a GEMM split along its
// columns (gemm_coop.wgsl), `n` values a slice, added in slice order.

struct Params {
    n: u32,
    slices: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> parts: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = element_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    var sum = 0.0;
    for (var s = 0u; s < p.slices; s++) {
        sum += parts[s * p.n + i];
    }
    y[i] = sum;
}
