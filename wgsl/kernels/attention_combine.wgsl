// Decode attention, second pass: per head, the blocks of attention_blocks.wgsl merged as one
// softmax: M = max m_b, L = Σ l_b·exp(m_b − M), o = Σ exp(m_b − M)·acc_b / L. With `gated` the
// output is multiplied by sigmoid(gate), the gate half of the head's 2·head_dim group of
// `gate_src` (the q projection's output); otherwise gate_src is unread. With `quantize` the
// output is also quantized for the output projection's integer GEMV (quantize_quad.wgsl), so it
// needs no pass of its own. One workgroup per head, one invocation per four values.

struct Params {
    n_head: u32,
    head_dim: u32,
    blocks: u32,
    gated: u32,
    quantize: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read> gate_src: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> quantized: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = workgroup_index(wid, nwg);
    if (h >= p.n_head) {
        return;
    }
    let stride = 2u + p.head_dim;
    let first = h * p.blocks * stride;
    var overall = -3.0e38;
    for (var b = 0u; b < p.blocks; b++) {
        overall = max(overall, partial[first + b * stride]);
    }
    var total = 0.0;
    for (var b = 0u; b < p.blocks; b++) {
        total += partial[first + b * stride + 1u] * exp(partial[first + b * stride] - overall);
    }
    let quads = p.head_dim / 4u;
    for (var base = 0u; base < quads; base += WG) {
        // Invocations past the head's end still take part in the run exchanges.
        let in_range = base + lid < quads;
        let d = 4u * min(base + lid, quads - 1u);
        var o = vec4<f32>(0.0);
        for (var b = 0u; b < p.blocks; b++) {
            let at = first + b * stride;
            let acc = at + 2u + d;
            let values = vec4<f32>(partial[acc], partial[acc + 1u], partial[acc + 2u], partial[acc + 3u]);
            o += values * exp(partial[at] - overall);
        }
        o /= total;
        if (p.gated != 0u) {
            let g = (h * 2u + 1u) * p.head_dim + d;
            let gate = vec4<f32>(gate_src[g], gate_src[g + 1u], gate_src[g + 2u], gate_src[g + 3u]);
            o *= 1.0 / (1.0 + exp(-gate));
        }
        let at = h * p.head_dim + d;
        if (in_range) {
            out[at] = o.x;
            out[at + 1u] = o.y;
            out[at + 2u] = o.z;
            out[at + 3u] = o.w;
        }
        if (p.quantize != 0u) {
            quantize_quad(o, at / 4u, lid, in_range);
        }
    }
}
