// rms_norm.wgsl's output as it is: nothing more after a group's values.
fn finish_group(base: u32, lid: u32) {}
