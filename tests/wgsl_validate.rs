//! Every WGSL kernel parses and validates with naga (no GPU needed), and every file in wgsl/ is
//! part of some kernel.

use std::collections::BTreeSet;

use qwen35::backend::gpu::kernel_sources;

#[test]
fn every_kernel_validates() {
    let mut failures = Vec::new();
    for kernel in kernel_sources() {
        let module = match naga::front::wgsl::parse_str(&kernel.source) {
            Ok(module) => module,
            Err(e) => {
                failures.push(format!(
                    "{}: {}",
                    kernel.name,
                    e.emit_to_string(&kernel.source)
                ));
                continue;
            }
        };
        let capabilities = if kernel.subgroups {
            naga::valid::Capabilities::SUBGROUP
        } else {
            naga::valid::Capabilities::empty()
        };
        let mut validator =
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities);
        if kernel.subgroups {
            validator
                .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
                .subgroup_operations(naga::valid::SubgroupOperationSet::all());
        }
        if let Err(e) = validator.validate(&module) {
            failures.push(format!(
                "{}: {}",
                kernel.name,
                e.emit_to_string(&kernel.source)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_wgsl_file_is_used() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/wgsl");
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir)
        .expect("wgsl/ is readable")
        .map(|entry| {
            entry
                .expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".wgsl"))
        .collect();
    let used: BTreeSet<String> = kernel_sources()
        .iter()
        .flat_map(|k| k.files.iter().map(|f| f.to_string()))
        .collect();
    let unused: Vec<_> = on_disk.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "files in wgsl/ no kernel uses: {unused:?}"
    );
    assert!(
        on_disk.len() >= 20,
        "only {} wgsl files found",
        on_disk.len()
    );
}
