// rms_norm.wgsl's output also quantized for the integer GEMVs (quantize_pair.wgsl), so the
// projections of a normed input need no pass of their own. Groups are whole pairs of runs.
@group(0) @binding(5) var<storage, read_write> quantized: array<vec4<u32>>;

fn finish_group(base: u32, lid: u32) {
    // The group's values, written by the whole workgroup, are read back by single invocations.
    storageBarrier();
    for (var pair = lid; pair < p.group / 64u; pair += WG) {
        let first = base + pair * 64u;
        var v: array<vec4<f32>, 16>;
        for (var i = 0u; i < 16u; i++) {
            let e = first + 4u * i;
            v[i] = vec4<f32>(out[e], out[e + 1u], out[e + 2u], out[e + 3u]);
        }
        quantize_pair(v, first / 64u);
    }
}
