// NeoX RoPE on the first rot_dims columns of every head_dim group; row t is at position pos0 + t.
// Element d < rot_dims/2 pairs with d + rot_dims/2. The inverse frequencies come from the host
// (computed there exactly as the reference does).

struct Params {
    n: u32,
    cols: u32,
    head_dim: u32,
    rot_dims: u32,
    pos0: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = element_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let d = (i % p.cols) % p.head_dim;
    if (d >= p.rot_dims) {
        out[i] = x[i];
        return;
    }
    let half = p.rot_dims / 2u;
    let pos = f32(p.pos0 + i / p.cols);
    let r = rotation(pos, inv_freq[d % half]);
    if (d < half) {
        out[i] = x[i] * r.x - x[i + half] * r.y;
    } else {
        out[i] = x[i] * r.x + x[i - half] * r.y;
    }
}
