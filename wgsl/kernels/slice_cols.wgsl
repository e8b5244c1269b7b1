// In each group of `group` columns, columns offset..offset+width, concatenated.

struct Params {
    n: u32,
    group: u32,
    offset: u32,
    width: u32,
}

@group(0) @binding(0) var<storage, read> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = element_index(wid, nwg, lid);
    if (i < p.n) {
        out[i] = x[(i / p.width) * p.group + p.offset + i % p.width];
    }
}
