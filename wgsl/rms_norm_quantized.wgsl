// rms_norm.wgsl's output (x / sqrt(mean(x²) + eps) ⊙ w, times silu(z) when `gated`), also
// quantized for the integer GEMVs (quantize_pair.wgsl), so the projections of a normed input need
// no pass of their own. Groups are whole pairs of runs (64 values); one workgroup per group and
// one invocation per pair: an invocation's 64 values come in as 16 vec4 loads at once and are
// quantized where they were normed, with no exchange between invocations but the sum of squares.

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
@group(0) @binding(5) var<storage, read_write> quantized: array<vec4<u32>>;

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
    let pairs = p.group / 64u;
    let first_pair = g * pairs;
    var squares = 0.0;
    for (var pair = lid; pair < pairs; pair += WG) {
        for (var i = 0u; i < 16u; i++) {
            let v = x[(first_pair + pair) * 16u + i];
            squares += dot(v, v);
        }
    }
    let scale = 1.0 / sqrt(workgroup_sum(squares, lid) / f32(p.group) + p.eps);
    for (var pair = lid; pair < pairs; pair += WG) {
        let at = (first_pair + pair) * 16u;
        var v: array<vec4<f32>, 16>;
        for (var i = 0u; i < 16u; i++) {
            v[i] = x[at + i] * scale * w[pair * 16u + i];
            if (p.gated != 0u) {
                let gate = z[at + i];
                v[i] *= gate / (1.0 + exp(-gate));
            }
            out[at + i] = v[i];
        }
        quantize_pair(v, first_pair + pair);
    }
}
