//! What the WGSL and MSL kernel sets share: their source files, compiled into the binary, and
//! pipelines built under a validation error scope.

/// One source file of a kernel set, compiled into the binary.
#[derive(Clone, Copy, Debug)]
pub struct SourceFile {
    pub name: &'static str,
    pub source: &'static str,
}

/// The [`SourceFile`] `$dir/$name$ext` of the crate.
macro_rules! source_file {
    ($dir:literal, $name:literal, $ext:literal) => {
        $crate::backend::gpu::kernel_build::SourceFile {
            name: concat!($name, $ext),
            source: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/",
                $dir,
                "/",
                $name,
                $ext
            )),
        }
    };
}
pub(crate) use source_file;

/// The compute pipeline of `entry_point` in the module (and, where not `None`, the layout) that
/// `make` creates, all built inside a validation error scope so that a kernel which does not
/// build is an error naming it rather than a device error for later ops; the error is the
/// validation message.
pub(crate) fn validated_pipeline(
    device: &wgpu::Device,
    label: &str,
    entry_point: &str,
    make: impl FnOnce() -> (wgpu::ShaderModule, Option<wgpu::PipelineLayout>),
) -> Result<wgpu::ComputePipeline, String> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let (module, layout) = make();
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: layout.as_ref(),
        module: &module,
        entry_point: Some(entry_point),
        compilation_options: wgpu::PipelineCompilationOptions::default(),
        cache: None,
    });
    match pollster::block_on(scope.pop()) {
        Some(error) => Err(error.to_string()),
        None => Ok(pipeline),
    }
}
