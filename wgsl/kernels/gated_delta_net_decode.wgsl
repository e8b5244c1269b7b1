// One decode token of the Gated DeltaNet (QWEN35.md §5.2–5.6) in one pass: the causal conv +
// SiLU of the token's m over the carried rows (conv_qkv_norm.wgsl), q and k L2-normalised per
// head (q also scaled), the gates (delta_net_gates.wgsl), the delta rule (delta_rule.wgsl) and the
// gated RMS norm with silu(z) per value head (rms_norm_quantized.wgsl, quantized for the output
// projection's integer GEMV when `quantize`).
// One workgroup per key head: it owns that head's q and k channels and every value head that
// reads them (h ≡ key head mod n_k_head), one value head after the other. So no other workgroup
// reads the conv-state channels it shifts in place, and a value head's norm needs no sum across
// workgroups. Each invocation holds up to KEYS state rows of one column of the value head.

struct Params {
    n_k_head: u32,
    n_v_head: u32,
    k_dim: u32,
    v_dim: u32,
    taps: u32,
    q_scale: f32,
    eps: f32,
    norm_eps: f32,
    quantize: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> m: array<f32>;
@group(0) @binding(2) var<storage, read> conv_w: array<f32>;
@group(0) @binding(3) var<storage, read_write> conv_state: array<f32>;
@group(0) @binding(4) var<storage, read> alpha: array<f32>;
@group(0) @binding(5) var<storage, read> beta: array<f32>;
@group(0) @binding(6) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(7) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(8) var<storage, read> z: array<f32>;
@group(0) @binding(9) var<storage, read> norm_w: array<f32>;
@group(0) @binding(10) var<storage, read_write> state: array<f32>;
@group(0) @binding(11) var<storage, read_write> out: array<f32>;
@group(0) @binding(12) var<storage, read_write> quantized: array<u32>;

// k_dim and v_dim are at most WG (one channel per invocation); the host checks that a value
// head's k_dim × v_dim state fits KEYS rows per invocation.
const KEYS: u32 = 64u;

var<workgroup> q_t: array<f32, WG>;
var<workgroup> k_t: array<f32, WG>;
var<workgroup> v_t: array<f32, WG>;
var<workgroup> parts: array<f32, WG>;
var<workgroup> normed: array<f32, WG>;

fn channels() -> u32 {
    return 2u * p.n_k_head * p.k_dim + p.n_v_head * p.v_dim;
}

// SiLU of the conv of channel c over the carried rows and the token; shifts the channel's carried
// rows by one (the oldest dropped, the token's appended) as it reads them.
fn conv_step(c: u32) -> f32 {
    let carried = p.taps - 1u;
    let stride = channels();
    var sum = 0.0;
    for (var r = 0u; r < carried; r++) {
        let x = conv_state[r * stride + c];
        sum += conv_w[c * p.taps + r] * x;
        if (r > 0u) {
            conv_state[(r - 1u) * stride + c] = x;
        }
    }
    let x = m[c];
    sum += conv_w[c * p.taps + carried] * x;
    if (carried > 0u) {
        conv_state[(carried - 1u) * stride + c] = x;
    }
    return sum / (1.0 + exp(-sum));
}

// The sum over the slices' parts of column `col`.
fn column_sum(col: u32, slices: u32) -> f32 {
    var total = 0.0;
    for (var slice = 0u; slice < slices; slice++) {
        total += parts[slice * p.v_dim + col];
    }
    return total;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let key_head = workgroup_index(wid, nwg);
    if (key_head >= p.n_k_head) {
        return;
    }
    let key_width = p.n_k_head * p.k_dim;
    var q_i = 0.0;
    var k_i = 0.0;
    if (lid < p.k_dim) {
        q_i = conv_step(key_head * p.k_dim + lid);
        k_i = conv_step(key_width + key_head * p.k_dim + lid);
    }
    let q_factor = p.q_scale / sqrt(workgroup_sum(q_i * q_i, lid) + p.eps);
    let k_factor = 1.0 / sqrt(workgroup_sum(k_i * k_i, lid) + p.eps);
    if (lid < p.k_dim) {
        q_t[lid] = q_i * q_factor;
        k_t[lid] = k_i * k_factor;
    }
    // Invocation lid holds column `col` of the state, rows first_key … first_key + keys − 1.
    let slices = WG / p.v_dim;
    let col = lid % p.v_dim;
    let slice = lid / p.v_dim;
    let live = slice < slices;
    let keys = (p.k_dim + slices - 1u) / slices;
    let first_key = slice * keys;
    let quads = p.v_dim / 4u;
    for (var h = key_head; h < p.n_v_head; h += p.n_k_head) {
        if (lid < p.v_dim) {
            v_t[lid] = conv_step(2u * key_width + h * p.v_dim + lid);
        }
        let decay = exp(ssm_a[h] * softplus(alpha[h] + dt_bias[h]));
        let strength = 1.0 / (1.0 + exp(-beta[h]));
        // q_t, k_t and v_t are written.
        workgroupBarrier();
        let s_base = h * p.k_dim * p.v_dim + col;
        var s: array<f32, KEYS>;
        var recalled = 0.0;
        for (var e = 0u; e < KEYS; e++) {
            let key = first_key + e;
            if (live && e < keys && key < p.k_dim) {
                s[e] = state[s_base + key * p.v_dim] * decay;
                recalled += s[e] * k_t[key];
            }
        }
        parts[lid] = recalled;
        workgroupBarrier();
        var delta = 0.0;
        if (live) {
            delta = strength * (v_t[col] - column_sum(col, slices));
        }
        // Everyone has read the parts before they are overwritten.
        workgroupBarrier();
        var o = 0.0;
        for (var e = 0u; e < KEYS; e++) {
            let key = first_key + e;
            if (live && e < keys && key < p.k_dim) {
                s[e] += k_t[key] * delta;
                o += s[e] * q_t[key];
                state[s_base + key * p.v_dim] = s[e];
            }
        }
        parts[lid] = o;
        workgroupBarrier();
        var y = 0.0;
        if (lid < p.v_dim) {
            y = column_sum(lid, slices);
        }
        let scale = 1.0 / sqrt(workgroup_sum(y * y, lid) / f32(p.v_dim) + p.norm_eps);
        if (lid < p.v_dim) {
            let at = h * p.v_dim + lid;
            let gate = z[at];
            y *= scale * norm_w[lid] * gate / (1.0 + exp(-gate));
            out[at] = y;
            normed[lid] = y;
        }
        if (p.quantize != 0u) {
            workgroupBarrier();
            // Invocations past the head's quads still take part in the run exchanges.
            let quad = min(lid, quads - 1u);
            let v = vec4<f32>(
                normed[4u * quad],
                normed[4u * quad + 1u],
                normed[4u * quad + 2u],
                normed[4u * quad + 3u],
            );
            quantize_quad(v, h * quads + quad, lid, lid < quads);
        }
        // v_t, the parts and the normed values are rewritten for the next value head.
        workgroupBarrier();
    }
}
