//! Every WGSL kernel parses and validates with naga (no GPU needed), and every file in wgsl/ is
//! part of some kernel.

use std::collections::BTreeSet;

use qwen35::backend::gpu::kernel_sources;

/// What a device that runs the GEMM on cooperative matrices offers its kernels (f16 packing in
/// f32 comes with every WebGPU-compliant adapter).
const COOPERATIVE_GEMM: naga::valid::Capabilities = naga::valid::Capabilities::SUBGROUP
    .union(naga::valid::Capabilities::COOPERATIVE_MATRIX)
    .union(naga::valid::Capabilities::SHADER_FLOAT16)
    .union(naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32);

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
        // unpack2x16float, which every WebGPU-compliant adapter offers.
        let mut capabilities = naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        if kernel.subgroups {
            capabilities |= naga::valid::Capabilities::SUBGROUP;
        }
        if kernel.cooperative_matrix {
            capabilities |= COOPERATIVE_GEMM;
        }
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
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    let wgsl_in = |folder: &str| -> BTreeSet<String> {
        std::fs::read_dir(root.join(folder))
            .expect("wgsl/ is readable")
            .map(|entry| {
                let name = entry.expect("directory entry").file_name();
                format!("{folder}/{}", name.to_string_lossy())
            })
            .filter(|name| name.ends_with(".wgsl"))
            .collect()
    };
    // Kernels (with an entry point) in wgsl/kernels/, the fragments they include in wgsl/lib/.
    let kernels = wgsl_in("kernels");
    let fragments = wgsl_in("lib");
    assert!(
        wgsl_in(".").is_empty(),
        "WGSL files outside kernels/ and lib/"
    );
    for name in kernels.iter().chain(&fragments) {
        let source = std::fs::read_to_string(root.join(name)).expect("readable");
        assert_eq!(
            source.contains("@compute"),
            name.starts_with("kernels/"),
            "{name}: an entry point belongs in wgsl/kernels/, a fragment in wgsl/lib/"
        );
    }
    let on_disk: BTreeSet<String> = kernels.union(&fragments).cloned().collect();
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

/// The kernels on cooperative matrices run only on adapters that lavapipe is not; at least the
/// SPIR-V that wgpu's Vulkan backend makes of them must come out of naga.
#[test]
fn cooperative_kernels_compile_to_spirv() {
    let mut compiled = 0;
    for kernel in kernel_sources().iter().filter(|k| k.cooperative_matrix) {
        let module = naga::front::wgsl::parse_str(&kernel.source).expect("parses");
        let info =
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), COOPERATIVE_GEMM)
                .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
                .subgroup_operations(naga::valid::SubgroupOperationSet::all())
                .validate(&module)
                .expect("validates");
        let options = naga::back::spv::Options {
            lang_version: (1, 6),
            ..Default::default()
        };
        let words = naga::back::spv::write_vec(&module, &info, &options, None)
            .unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
        if let Ok(dir) = std::env::var("QWEN35_SPIRV_DUMP") {
            std::fs::write(
                format!("{dir}/{}.spv", kernel.name),
                bytemuck::cast_slice(&words),
            )
            .unwrap();
        }
        assert!(words.len() > 100, "{}", kernel.name);
        compiled += 1;
    }
    assert!(compiled > 0, "no kernel uses cooperative matrices");
}
