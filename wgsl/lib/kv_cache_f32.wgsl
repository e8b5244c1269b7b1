// KV cache rows in f32 (the default; f16 with --f16-kv-cache): kv_cache_f16.wgsl's interface
// over plain values.

alias KvPair = vec2<f32>;
alias KvQuad = vec4<f32>;

fn kv_pair(values: vec2<f32>) -> KvPair {
    return values;
}

fn kv_pair_values(stored: KvPair) -> vec2<f32> {
    return stored;
}

fn kv_quad(values: vec4<f32>) -> KvQuad {
    return values;
}

fn kv_quad_values(stored: KvQuad) -> vec4<f32> {
    return stored;
}
