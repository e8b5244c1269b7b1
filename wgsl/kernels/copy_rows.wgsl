// dst[dst_offset + i] = src[src_offset + i] for i < n: row ranges and cache writes, kept inside
// the compute pass (a buffer copy would end it).

struct Params {
    n: u32,
    src_offset: u32,
    dst_offset: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = element_index(wid, nwg, lid);
    if (i < p.n) {
        dst[p.dst_offset + i] = src[p.src_offset + i];
    }
}
