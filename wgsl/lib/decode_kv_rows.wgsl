// The key and value rows of one decode step: rows before pos0 come from the cache, row pos0
// (this step's) from k_new / v_new, which the kernel also copies into the cache; nothing reads
// that cache row in the same dispatch. `lane` is a vec4 index within a row of all kv heads.
// The kernel declares p (with pos0 and kv_cols), k_new, v_new, and k_cache and v_cache as
// `array<KvQuad>` (kv_cache_*.wgsl).

fn key_at(j: u32, lane: u32) -> vec4<f32> {
    if (j < p.pos0) {
        return kv_quad_values(k_cache[j * p.kv_cols / 4u + lane]);
    }
    return k_new[lane];
}

fn value_at(j: u32, lane: u32) -> vec4<f32> {
    if (j < p.pos0) {
        return kv_quad_values(v_cache[j * p.kv_cols / 4u + lane]);
    }
    return v_new[lane];
}

// Copies this step's k and v vec4 `lane` into cache row pos0.
fn append_kv(lane: u32) {
    let dst = p.pos0 * p.kv_cols / 4u + lane;
    k_cache[dst] = kv_quad(k_new[lane]);
    v_cache[dst] = kv_quad(v_new[lane]);
}
