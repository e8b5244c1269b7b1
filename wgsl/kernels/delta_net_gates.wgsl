// Gated DeltaNet gates per (token, head): g = ssm_a·softplus(alpha + dt_bias), β = sigmoid(beta).

struct Params {
    n: u32,
    heads: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> alpha: array<f32>;
@group(0) @binding(2) var<storage, read> beta: array<f32>;
@group(0) @binding(3) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> g_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> beta_out: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = element_index(wid, nwg, lid);
    if (i < p.n) {
        let h = i % p.heads;
        g_out[i] = ssm_a[h] * softplus(alpha[i] + dt_bias[h]);
        beta_out[i] = 1.0 / (1.0 + exp(-beta[i]));
    }
}
