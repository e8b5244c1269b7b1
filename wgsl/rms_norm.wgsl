// Per group of `group` columns: x / sqrt(mean(x²) + eps) ⊙ w, times silu(z) when `gated`
// (z is then bound to the gate; otherwise to x and unread). One workgroup per group.

struct Params {
    group: u32,
    groups: u32,
    eps: f32,
    gated: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> z: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

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
    let scale = 1.0 / sqrt(workgroup_sum(squares, lid) / f32(p.group) + p.eps);
    for (var i = lid; i < p.group; i += WG) {
        var v = x[base + i] * scale * w[i];
        if (p.gated != 0u) {
            let zv = z[base + i];
            v *= zv / (1.0 + exp(-zv));
        }
        out[base + i] = v;
    }
}
