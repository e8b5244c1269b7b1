// rms_norm.wgsl's output (x / sqrt(mean(x²) + eps) ⊙ w, times silu(z) when `gated`), also
// quantized for the integer GEMVs (quantize_quad.wgsl), so the projections of a normed input
// need no pass of their own. Groups are whole pairs of runs (64 values). A group is cut into
// chunks of 4·WG values, a workgroup each, one invocation per four values; every chunk's
// workgroup sums the squares of its whole group (a 20 KiB row, from cache), which is shorter
// than one workgroup doing the whole group: a decode token's norm is latency, not bandwidth.

struct Params {
    group: u32,
    groups: u32,
    eps: f32,
    gated: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> z: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> quantized: array<u32>;

const UNROLL: u32 = 4u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let quads = p.group / 4u;
    let chunks = (quads + WG - 1u) / WG;
    let id = workgroup_index(wid, nwg);
    let g = id / chunks;
    if (g >= p.groups) {
        return;
    }
    let first = g * quads;
    // UNROLL loads in flight per invocation, not one load and a wait per vec4.
    var squares = 0.0;
    for (var i = lid; i < quads; i += UNROLL * WG) {
        var v: array<vec4<f32>, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) {
            v[u] = x[first + min(i + u * WG, quads - 1u)];
        }
        for (var u = 0u; u < UNROLL; u++) {
            if (i + u * WG < quads) {
                squares += dot(v[u], v[u]);
            }
        }
    }
    let scale = 1.0 / sqrt(workgroup_sum(squares, lid) / f32(p.group) + p.eps);
    // Invocations past the group's end still take part in the run exchanges.
    let i = (id % chunks) * WG + lid;
    let c = min(i, quads - 1u);
    var v = x[first + c] * scale * w[c];
    if (p.gated != 0u) {
        let gate = z[first + c];
        v *= gate / (1.0 + exp(-gate));
    }
    let in_range = i < quads;
    if (in_range) {
        out[first + c] = v;
    }
    quantize_quad(v, first + c, lid, in_range);
}
