// Per group of `group` columns: x · scale / sqrt(Σx² + eps). One workgroup per group.

struct Params {
    group: u32,
    groups: u32,
    scale: f32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = workgroup_index(wid, nwg);
    if (g >= p.groups) {
        return;
    }
    let base = g * p.group;
    var squares = 0.0;
    for (var i = lid; i < p.group; i += WG) {
        squares += x[base + i] * x[base + i];
    }
    let scale = p.scale / sqrt(workgroup_sum(squares, lid) + p.eps);
    for (var i = lid; i < p.group; i += WG) {
        out[base + i] = x[base + i] * scale;
    }
}
