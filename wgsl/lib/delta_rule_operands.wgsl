// The operands of the token-by-token delta-rule kernels (delta_rule.wgsl for a few rows,
// delta_rule_scan.wgsl for a prefill), which the host binds alike. `state` holds one f32 row
// per value head (k_dim × v_dim, key index major), updated in place. With `raw_gates` the decay
// and write strength come from the projections as they are (g = ssm_a·softplus(alpha +
// dt_bias), β = sigmoid(beta), as delta_net_gates.wgsl computes); otherwise `gate` and
// `strength` hold g and β, and ssm_a and dt_bias are unread.

struct Params {
    n_k_head: u32,
    n_v_head: u32,
    k_dim: u32,
    v_dim: u32,
    rows: u32,
    column_chunks: u32,
    raw_gates: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> gate: array<f32>;
@group(0) @binding(5) var<storage, read> strength: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(9) var<storage, read> dt_bias: array<f32>;

// Row t's g and β for value head h.
fn gates(t: u32, h: u32) -> vec2<f32> {
    let at = t * p.n_v_head + h;
    var g = gate[at];
    var beta = strength[at];
    if (p.raw_gates != 0u) {
        g = ssm_a[h] * softplus(g + dt_bias[h]);
        beta = 1.0 / (1.0 + exp(-beta));
    }
    return vec2<f32>(g, beta);
}
