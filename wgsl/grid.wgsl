// Workgroup size and grid indexing shared by every kernel. Grids may be folded into two
// dimensions because each dimension is limited to 65535 workgroups.
const WG: u32 = 64u;

fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn element_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return workgroup_index(wid, nwg) * WG + lid;
}
