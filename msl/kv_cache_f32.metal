// KV cache values in f32 (the default; f16 with --f16-kv-cache): kv_cache_f16.metal's KvValue
// and KV_MAX over floats.
#include <metal_stdlib>
using namespace metal;

typedef float KvValue;
constant float KV_MAX = INFINITY;
