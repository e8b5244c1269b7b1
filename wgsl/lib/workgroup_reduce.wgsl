// Sums and maxima over the WG invocations of a workgroup, through workgroup memory. Every
// invocation must call these together (they contain barriers) and gets the same result.
var<workgroup> partial: array<f32, WG>;

fn workgroup_sum(v: f32, lid: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    // The next call may overwrite `partial` only after everyone has read the total.
    workgroupBarrier();
    return total;
}

fn workgroup_max(v: f32, lid: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            partial[lid] = max(partial[lid], partial[lid + stride]);
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}
