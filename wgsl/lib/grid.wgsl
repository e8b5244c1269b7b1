// Grid indexing shared by every kernel. Grids may be folded into two dimensions because each
// dimension is limited to 65535 workgroups. `WG`, the workgroup size, is defined ahead of this
// file by the host (Kernel::workgroup_size).

fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn element_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return workgroup_index(wid, nwg) * WG + lid;
}
