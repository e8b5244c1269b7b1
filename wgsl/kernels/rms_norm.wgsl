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

const UNROLL: u32 = 4u;

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
    let last = p.group - 1u;
    // UNROLL loads in flight per invocation, not one load and a wait per element.
    var squares = 0.0;
    for (var i = lid; i < p.group; i += UNROLL * WG) {
        var v: array<f32, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            v[u] = x[base + min(i + u * WG, last)];
        }
        for (var u = 0u; u < UNROLL; u++) {
            if (i + u * WG < p.group) {
                squares += v[u] * v[u];
            }
        }
    }
    let scale = 1.0 / sqrt(workgroup_sum(squares, lid) / f32(p.group) + p.eps);
    for (var i = lid; i < p.group; i += UNROLL * WG) {
        var v: array<f32, UNROLL>;
        var weight: array<f32, UNROLL>;
        var gate: array<f32, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            let c = min(i + u * WG, last);
            v[u] = x[base + c];
            weight[u] = w[c];
            gate[u] = z[base + c];
        }
        for (var u = 0u; u < UNROLL; u++) {
            let c = i + u * WG;
            if (c < p.group) {
                var y = v[u] * scale * weight[u];
                if (p.gated != 0u) {
                    y *= gate[u] / (1.0 + exp(-gate[u]));
                }
                out[base + c] = y;
            }
        }
    }
}
