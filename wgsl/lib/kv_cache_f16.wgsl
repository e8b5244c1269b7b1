// KV cache rows in f16, two halves to a u32 word (pack2x16float, so that devices without
// SHADER_F16 read them too): a pair of values is one word, a quad two. Values beyond the f16
// range are clamped to it (pack2x16float leaves them undefined). The kernels take the cache as
// `array<KvPair>` or `array<KvQuad>`; kv_cache_f32.wgsl is the same interface in f32.

alias KvPair = u32;
alias KvQuad = vec2<u32>;

const KV_MAX: f32 = 65504.0;

fn kv_pair(values: vec2<f32>) -> KvPair {
    return pack2x16float(clamp(values, vec2<f32>(-KV_MAX), vec2<f32>(KV_MAX)));
}

fn kv_pair_values(stored: KvPair) -> vec2<f32> {
    return unpack2x16float(stored);
}

fn kv_quad(values: vec4<f32>) -> KvQuad {
    return KvQuad(kv_pair(values.xy), kv_pair(values.zw));
}

fn kv_quad_values(stored: KvQuad) -> vec4<f32> {
    return vec4<f32>(kv_pair_values(stored.x), kv_pair_values(stored.y));
}
