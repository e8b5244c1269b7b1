// KV cache values in f16 (`half`), as attention_blocks.metal stores and loads them (KvValue);
// kv_cache_f32.metal is the same in f32. Values beyond the f16 range are clamped to it, as the
// WGSL kernels clamp what they store in the same caches.
#include <metal_stdlib>
using namespace metal;

typedef half KvValue;
constant float KV_MAX = 65504.0f;
