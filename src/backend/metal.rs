//! `--backend metal`: the GPU backend ([`Wgpu`]) on a Metal adapter with the MSL kernel set
//! installed, the hand-written kernels of `msl/` built as wgpu MSL passthrough pipelines; the
//! backend sends them the ops of one token (decode) and the WGSL kernels the rest (prefill).
//!
//! A passthrough pipeline has no reflection, so each gets an explicit layout: binding 0 is the
//! parameter struct (uniform), bindings 1.. the kernel's buffers in order. wgpu's Metal backend
//! gives the buffers of a layout `[[buffer(0)]]`, `[[buffer(1)]]`, … in binding order, which is
//! how the kernels declare them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::backend::gpu::msl_kernels::{Access, MslKernel};
use crate::backend::gpu::msl_ops::Dispatch;
use crate::backend::gpu::{validated_pipeline, GpuError, GpuOptions, MslLauncher, Program, Wgpu};

/// Opens the Metal adapter and builds the WGSL and MSL pipelines (the WGSL side set up by
/// `options`); elsewhere, says why not.
pub fn open(options: &GpuOptions) -> Result<Wgpu, MetalError> {
    // The MSL kernels read Q6_K blocks as the file lays them out.
    let options = GpuOptions {
        q6_k_aligned: false,
        ..options.clone()
    };
    let gpu = match Wgpu::new_metal(&options) {
        Ok(gpu) => gpu,
        Err(GpuError::NoAdapter(_)) => {
            return Err(MetalError::NoMetalAdapter {
                found: adapters_here(),
            })
        }
        Err(other) => return Err(other.into()),
    };
    if !gpu
        .device()
        .features()
        .contains(wgpu::Features::PASSTHROUGH_SHADERS)
    {
        return Err(MetalError::NoPassthrough {
            adapter: gpu.adapter_description(),
        });
    }
    let pipelines = MslPipelines::build(gpu.device())?;
    Ok(gpu.with_msl(Arc::new(pipelines)))
}

#[derive(Debug, thiserror::Error)]
pub enum MetalError {
    #[error(
        "no Metal adapter: the Metal backend runs on Apple GPUs under macOS \
         (adapters here: {found}); use --backend wgpu or cpu"
    )]
    NoMetalAdapter { found: String },
    #[error("the Metal adapter {adapter} does not offer MSL passthrough shaders")]
    NoPassthrough { adapter: String },
    #[error("MSL kernel {kernel} does not build: {reason}")]
    Kernel { kernel: String, reason: String },
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// The GPUs wgpu finds on any backend, for saying why none is Metal.
fn adapters_here() -> String {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let names: Vec<String> = adapters
        .iter()
        .map(|a| {
            let info = a.get_info();
            format!("{} on {:?}", info.name, info.backend)
        })
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Every MSL kernel's pipeline, built once.
struct MslPipelines {
    by_kernel: HashMap<MslKernel, wgpu::ComputePipeline>,
}

impl MslPipelines {
    fn build(device: &wgpu::Device) -> Result<MslPipelines, MetalError> {
        let mut by_kernel = HashMap::new();
        for kernel in MslKernel::all() {
            let name = kernel.name();
            let pipeline = validated_pipeline(device, &name, kernel.entry(), || {
                // SAFETY: the source is our MSL, tested under the simulator; the entry point and
                // its threadgroup size are the ones the kernel is written for.
                let module = unsafe {
                    device.create_shader_module_passthrough(
                        wgpu::ShaderModuleDescriptorPassthrough {
                            label: Some(&name),
                            entry_points: Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                                name: kernel.entry().into(),
                                workgroup_size: (kernel.threads_per_threadgroup(), 1, 1),
                            }]),
                            msl: Some(Cow::Owned(kernel.source())),
                            ..Default::default()
                        },
                    )
                };
                (module, Some(pipeline_layout(device, kernel)))
            })
            .map_err(|reason| MetalError::Kernel {
                kernel: name,
                reason,
            })?;
            by_kernel.insert(kernel, pipeline);
        }
        Ok(MslPipelines { by_kernel })
    }
}

impl MslLauncher for MslPipelines {
    fn launch(&self, gpu: &Wgpu, d: &Dispatch<'_, wgpu::Buffer>) -> Result<(), GpuError> {
        let pipeline = self
            .by_kernel
            .get(&d.kernel)
            .ok_or_else(|| GpuError::Shape {
                op: d.kernel.entry(),
                detail: "no pipeline was built".into(),
            })?;
        gpu.record_program(
            pipeline,
            Program::Msl(d.kernel),
            d.params,
            d.buffers,
            [d.threadgroups as usize, 1, 1],
            d.bytes_read,
        )
    }
}

/// Binding 0: the parameter struct (read-only storage, as the recorder binds it for every
/// kernel); 1..: the kernel's buffers, read-only where it only reads.
fn pipeline_layout(device: &wgpu::Device, kernel: MslKernel) -> wgpu::PipelineLayout {
    let buffer = |binding: u32, ty: wgpu::BufferBindingType| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let mut entries = vec![buffer(
        0,
        wgpu::BufferBindingType::Storage { read_only: true },
    )];
    entries.extend(kernel.buffers().iter().zip(1..).map(|(access, binding)| {
        buffer(
            binding,
            wgpu::BufferBindingType::Storage {
                read_only: *access == Access::Read,
            },
        )
    }));
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(&kernel.name()),
        entries: &entries,
    });
    device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(&kernel.name()),
        bind_group_layouts: &[Some(&group)],
        immediate_size: 0,
    })
}
