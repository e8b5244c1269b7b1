// Rows of x (or silu(x) ⊙ up when `swiglu`) quantized for the integer GEMVs (quantize_quad.wgsl),
// one invocation per four values.

struct Params {
    rows: u32,
    cols: u32,
    swiglu: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> quantized: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let quads = p.rows * p.cols / 4u;
    let quad = element_index(wid, nwg, lid);
    // Invocations past the end still take part in the run exchanges.
    let at = min(quad, quads - 1u);
    var v = x[at];
    if (p.swiglu != 0u) {
        v = v / (1.0 + exp(-v)) * up[at];
    }
    quantize_quad(v, at, lid, quad < quads);
}
