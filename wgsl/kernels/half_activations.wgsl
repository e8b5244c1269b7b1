// x (tokens × cols, f32), or with `swiglu` silu(x) ⊙ up, as an f16 scratch matrix for the
// cooperative GEMM: `padded_tokens` rows of `padded_cols` halves, packed two to a word, zeros
// past the ends. Values beyond the f16 range are clamped to it rather than becoming infinities.
// One invocation per word. The SwiGLU product is computed as swiglu.wgsl computes it, so the
// halves are those of converting swiglu.wgsl's output.

struct Params {
    tokens: u32,
    cols: u32,
    padded_tokens: u32,
    padded_cols: u32,
    swiglu: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> halves: array<u32>;
// The SwiGLU's up (x again without `swiglu`).
@group(0) @binding(3) var<storage, read> up: array<f32>;

const F16_MAX: f32 = 65504.0;

fn value_at(t: u32, c: u32) -> f32 {
    if (t < p.tokens && c < p.cols) {
        let i = t * p.cols + c;
        var v = x[i];
        if (p.swiglu != 0u) {
            v = v / (1.0 + exp(-v)) * up[i];
        }
        return clamp(v, -F16_MAX, F16_MAX);
    }
    return 0.0;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let words = p.padded_cols / 2u;
    let i = element_index(wid, nwg, lid);
    if (i >= p.padded_tokens * words) {
        return;
    }
    let t = i / words;
    let c = (i % words) * 2u;
    halves[i] = pack2x16float(vec2<f32>(value_at(t, c), value_at(t, c + 1u)));
}
