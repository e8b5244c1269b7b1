// Rows of x (or silu(x) ⊙ up when `swiglu`) quantized for the integer GEMVs (quantize_pair.wgsl),
// one invocation per 64 values.

struct Params {
    rows: u32,
    cols: u32,
    swiglu: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> quantized: array<vec4<u32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let pair = element_index(wid, nwg, lid);
    if (pair >= p.rows * (p.cols / 64u)) {
        return;
    }
    var v: array<vec4<f32>, 16>;
    for (var i = 0u; i < 16u; i++) {
        let g = x[pair * 16u + i];
        v[i] = g;
        if (p.swiglu != 0u) {
            v[i] = g / (1.0 + exp(-g)) * up[pair * 16u + i];
        }
    }
    quantize_pair(v, pair);
}
