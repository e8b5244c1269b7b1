// Rows of q, or of k or v, as f16 for attention_prefill_coop.wgsl: per head `padded_rows` rows
// of `padded_dim` halves, two to a word, head-major (head h's rows are contiguous), zeros past
// the head dim and past the last row, times `scale`. Rows 0..pos0 come from `cache`, rows pos0..
// from `incoming`; with `write_cache` those are also written into the cache (k and v of this
// call), each pair of head dims by the one invocation that reads it (a word of an f16 cache,
// kv_cache_*.wgsl). Values beyond the f16 range are clamped to it. One invocation per word.

struct Params {
    heads: u32,
    head_dim: u32,
    padded_dim: u32,
    padded_rows: u32,
    pos0: u32,
    new_rows: u32,
    scale: f32,
    write_cache: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> incoming: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache: array<KvPair>;
@group(0) @binding(3) var<storage, read_write> halves: array<u32>;

const F16_MAX: f32 = 65504.0;

// Head dims d and d + 1 (d even; head_dim is even) of head h of `row`, scaled.
fn scaled_pair(row: u32, h: u32, d: u32) -> vec2<f32> {
    if (d >= p.head_dim || row >= p.pos0 + p.new_rows) {
        return vec2<f32>(0.0);
    }
    let at = h * p.head_dim + d;
    let cols = p.heads * p.head_dim;
    var pair: vec2<f32>;
    if (row < p.pos0) {
        pair = kv_pair_values(cache[(row * cols + at) / 2u]);
    } else {
        let source = (row - p.pos0) * cols + at;
        pair = vec2<f32>(incoming[source], incoming[source + 1u]);
        if (p.write_cache != 0u) {
            cache[(row * cols + at) / 2u] = kv_pair(pair);
        }
    }
    return clamp(pair * p.scale, vec2<f32>(-F16_MAX), vec2<f32>(F16_MAX));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let words = p.padded_dim / 2u;
    let i = element_index(wid, nwg, lid);
    if (i >= p.heads * p.padded_rows * words) {
        return;
    }
    let d = (i % words) * 2u;
    let row = (i / words) % p.padded_rows;
    let h = i / (words * p.padded_rows);
    halves[i] = pack2x16float(scaled_pair(row, h, d));
}
