// Decode attention, second pass: per head, the blocks of attention_blocks.wgsl merged as one
// softmax: M = max m_b, L = Σ l_b·exp(m_b − M), o = Σ exp(m_b − M)·acc_b / L. With `gated` the
// output is multiplied by sigmoid(gate), the gate half of the head's 2·head_dim group of
// `gate_src` (the q projection's output); otherwise gate_src is unread. One workgroup per head.

struct Params {
    n_head: u32,
    head_dim: u32,
    blocks: u32,
    gated: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read> gate_src: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

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
    for (var d = lid; d < p.head_dim; d += WG) {
        var o = 0.0;
        for (var b = 0u; b < p.blocks; b++) {
            let at = first + b * stride;
            o += partial[at + 2u + d] * exp(partial[at] - overall);
        }
        o /= total;
        if (p.gated != 0u) {
            let gate = gate_src[(h * 2u + 1u) * p.head_dim + d];
            o *= 1.0 / (1.0 + exp(-gate));
        }
        out[h * p.head_dim + d] = o;
    }
}
