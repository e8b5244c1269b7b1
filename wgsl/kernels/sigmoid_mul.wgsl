// out = x ⊙ sigmoid(gate), elementwise.

struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gate: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = element_index(wid, nwg, lid);
    if (i < p.n) {
        out[i] = x[i] / (1.0 + exp(-gate[i]));
    }
}
