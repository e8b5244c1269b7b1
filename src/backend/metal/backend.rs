//! `--backend metal`: the wgpu backend's device, queue, buffers and recorder, with the decode
//! ops (an activation of one row) dispatched as the hand-written MSL kernels through wgpu's MSL
//! passthrough, and everything else (prefill) as the WGSL kernels.
//!
//! A passthrough pipeline has no reflection, so each gets an explicit layout: binding 0 is the
//! parameter struct (uniform), bindings 1.. the kernel's buffers in order. wgpu's Metal backend
//! gives the buffers of a layout `[[buffer(0)]]`, `[[buffer(1)]]`, … in binding order, which is
//! how the kernels declare them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::kernels::{Access, MslKernel};
use super::ops::{self, Dispatch, MslDevice, WeightLayout, WeightPart};
use crate::backend::gpu::{GpuError, GpuTensor, GpuWeight, Program, Wgpu};
use crate::backend::{
    AttentionShape, Backend, BackendError, BackendStats, DeltaNetShape, Qkv, RopeShape,
};
use crate::gguf::{GgufFile, TensorInfo};

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
            let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let source = kernel.source();
            // SAFETY: the source is our MSL, tested under the simulator; the entry point and its
            // threadgroup size are the ones the kernel is written for.
            let module = unsafe {
                device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
                    label: Some(&name),
                    entry_points: Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                        name: kernel.entry().into(),
                        workgroup_size: (kernel.threads_per_threadgroup(), 1, 1),
                    }]),
                    msl: Some(Cow::Owned(source)),
                    ..Default::default()
                })
            };
            let layout = pipeline_layout(device, kernel);
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&name),
                layout: Some(&layout),
                module: &module,
                entry_point: Some(kernel.entry()),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            });
            if let Some(error) = pollster::block_on(scope.pop()) {
                return Err(MetalError::Kernel {
                    kernel: name,
                    reason: error.to_string(),
                });
            }
            by_kernel.insert(kernel, pipeline);
        }
        Ok(MslPipelines { by_kernel })
    }

    fn get(&self, kernel: MslKernel) -> Result<&wgpu::ComputePipeline, BackendError> {
        self.by_kernel
            .get(&kernel)
            .ok_or_else(|| BackendError::Shape {
                op: kernel.entry(),
                detail: "no pipeline was built".into(),
            })
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

/// The Metal backend: [`Wgpu`] on a Metal adapter plus the MSL pipelines.
pub struct Metal {
    gpu: Wgpu,
    pipelines: MslPipelines,
}

impl Metal {
    /// Opens the Metal adapter and builds the WGSL and MSL pipelines; elsewhere, says why not.
    pub fn new() -> Result<Metal, MetalError> {
        let gpu = match Wgpu::new_metal() {
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
        Ok(Metal { gpu, pipelines })
    }

    pub fn adapter_description(&self) -> String {
        self.gpu.adapter_description()
    }
}

fn gpu_error(op: &'static str, error: GpuError) -> BackendError {
    BackendError::Shape {
        op,
        detail: error.to_string(),
    }
}

impl MslDevice for Metal {
    type Tensor = GpuTensor;
    type Weight = GpuWeight;
    type Buffer = wgpu::Buffer;

    fn dims(&self, x: &GpuTensor) -> (usize, usize) {
        x.dims()
    }

    fn buffer<'a>(&self, x: &'a GpuTensor) -> &'a wgpu::Buffer {
        &x.buffer
    }

    fn weight<'a>(&self, w: &'a GpuWeight) -> WeightLayout<'a, wgpu::Buffer> {
        WeightLayout {
            name: &w.name,
            ty: w.format.ggml_type(),
            rows: w.rows,
            cols: w.cols,
            row_bytes: w.row_bytes,
            parts: w
                .parts
                .iter()
                .map(|p| WeightPart {
                    first_row: p.first_row,
                    rows: p.rows,
                    buffer: &p.buffer,
                })
                .collect(),
        }
    }

    fn output(&self, rows: usize, cols: usize) -> Result<GpuTensor, BackendError> {
        self.gpu
            .output(rows, cols)
            .map_err(|e| gpu_error("output", e))
    }

    fn dispatch(&self, d: &Dispatch<'_, wgpu::Buffer>) -> Result<(), BackendError> {
        let pipeline = self.pipelines.get(d.kernel)?;
        self.gpu
            .record_program(
                pipeline,
                Program::Msl(d.kernel),
                d.params,
                d.buffers,
                [d.threadgroups as usize, 1, 1],
                d.bytes_read,
            )
            .map_err(|e| gpu_error(d.kernel.entry(), e))
    }
}

/// Decode: the activation is a single row (one token), which the MSL kernels take.
fn decode(x: &GpuTensor) -> bool {
    x.rows == 1
}

impl Backend for Metal {
    type Tensor = GpuTensor;
    type Weight = GpuWeight;

    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<GpuWeight, BackendError> {
        Backend::upload_weight(&self.gpu, file, info)
    }

    fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<GpuTensor, BackendError> {
        Backend::upload(&self.gpu, rows, cols, data)
    }

    fn zeros(&self, rows: usize, cols: usize) -> GpuTensor {
        Backend::zeros(&self.gpu, rows, cols)
    }

    fn dims(&self, x: &GpuTensor) -> (usize, usize) {
        x.dims()
    }

    fn read_rows(&self, x: &GpuTensor, start: usize, count: usize) -> Vec<f32> {
        Backend::read_rows(&self.gpu, x, start, count)
    }

    fn write_rows(
        &self,
        x: &mut GpuTensor,
        start: usize,
        data: &[f32],
    ) -> Result<(), BackendError> {
        Backend::write_rows(&self.gpu, x, start, data)
    }

    fn embed(&self, table: &GpuWeight, tokens: &[u32]) -> Result<GpuTensor, BackendError> {
        if tokens.len() == 1 && table.cols.is_multiple_of(32) {
            ops::embed(self, table, tokens)
        } else {
            Backend::embed(&self.gpu, table, tokens)
        }
    }

    fn embed_ids(&self, table: &GpuWeight, ids: &GpuTensor) -> Result<GpuTensor, BackendError> {
        if decode(ids) && table.cols.is_multiple_of(32) {
            ops::embed_ids(self, table, ids)
        } else {
            Backend::embed_ids(&self.gpu, table, ids)
        }
    }

    fn argmax(&self, x: &GpuTensor) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::argmax(self, x)
        } else {
            Backend::argmax(&self.gpu, x)
        }
    }

    fn matmul(&self, x: &GpuTensor, w: &GpuWeight) -> Result<GpuTensor, BackendError> {
        if decode(x) && ops::has_gemv(self, w) {
            ops::matmul(self, x, w)
        } else {
            Backend::matmul(&self.gpu, x, w)
        }
    }

    fn rms_norm_matmul(
        &self,
        x: &GpuTensor,
        norm: &GpuTensor,
        eps: f32,
        w: &GpuWeight,
    ) -> Result<GpuTensor, BackendError> {
        if decode(x) && ops::has_gemv(self, w) {
            ops::rms_norm_matmul(self, x, norm, eps, w)
        } else {
            Backend::rms_norm_matmul(&self.gpu, x, norm, eps, w)
        }
    }

    fn matmul_add(
        &self,
        x: &GpuTensor,
        w: &GpuWeight,
        acc: &mut GpuTensor,
    ) -> Result<(), BackendError> {
        if decode(x) && ops::has_gemv(self, w) {
            ops::matmul_add(self, x, w, acc)
        } else {
            Backend::matmul_add(&self.gpu, x, w, acc)
        }
    }

    fn swiglu_matmul_add(
        &self,
        gate: &GpuTensor,
        up: &GpuTensor,
        w: &GpuWeight,
        acc: &mut GpuTensor,
    ) -> Result<(), BackendError> {
        if decode(gate) && ops::has_gemv(self, w) {
            ops::swiglu_matmul_add(self, gate, up, w, acc)
        } else {
            Backend::swiglu_matmul_add(&self.gpu, gate, up, w, acc)
        }
    }

    fn rows(&self, x: &GpuTensor, start: usize, count: usize) -> Result<GpuTensor, BackendError> {
        if count == 1 {
            ops::rows(self, x, start, count)
        } else {
            Backend::rows(&self.gpu, x, start, count)
        }
    }

    fn slice_cols(
        &self,
        x: &GpuTensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::slice_cols(self, x, group, offset, width)
        } else {
            Backend::slice_cols(&self.gpu, x, group, offset, width)
        }
    }

    fn rms_norm(&self, x: &GpuTensor, w: &GpuTensor, eps: f32) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::rms_norm(self, x, w, eps)
        } else {
            Backend::rms_norm(&self.gpu, x, w, eps)
        }
    }

    fn l2_norm(
        &self,
        x: &GpuTensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::l2_norm(self, x, group, scale, eps)
        } else {
            Backend::l2_norm(&self.gpu, x, group, scale, eps)
        }
    }

    fn add(&self, x: &mut GpuTensor, y: &GpuTensor) -> Result<(), BackendError> {
        if decode(x) {
            ops::add(self, x, y)
        } else {
            Backend::add(&self.gpu, x, y)
        }
    }

    fn swiglu(&self, gate: &GpuTensor, up: &GpuTensor) -> Result<GpuTensor, BackendError> {
        if decode(gate) {
            ops::swiglu(self, gate, up)
        } else {
            Backend::swiglu(&self.gpu, gate, up)
        }
    }

    fn sigmoid_mul(&self, x: &GpuTensor, gate: &GpuTensor) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::sigmoid_mul(self, x, gate)
        } else {
            Backend::sigmoid_mul(&self.gpu, x, gate)
        }
    }

    fn rope(
        &self,
        x: &GpuTensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::rope(self, x, head_dim, rot_dims, freq_base, pos0)
        } else {
            Backend::rope(&self.gpu, x, head_dim, rot_dims, freq_base, pos0)
        }
    }

    fn attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        k_cache: &mut GpuTensor,
        v_cache: &mut GpuTensor,
        pos0: usize,
        shape: AttentionShape,
    ) -> Result<GpuTensor, BackendError> {
        if decode(q) {
            ops::attention(self, q, k, v, k_cache, v_cache, pos0, shape)
        } else {
            Backend::attention(&self.gpu, q, k, v, k_cache, v_cache, pos0, shape)
        }
    }

    fn gated_attention(
        &self,
        q_and_gate: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        q_norm: &GpuTensor,
        k_norm: &GpuTensor,
        eps: f32,
        rope: RopeShape,
        k_cache: &mut GpuTensor,
        v_cache: &mut GpuTensor,
        pos0: usize,
        shape: AttentionShape,
    ) -> Result<GpuTensor, BackendError> {
        if decode(q_and_gate) {
            ops::gated_attention(
                self, q_and_gate, k, v, q_norm, k_norm, eps, rope, k_cache, v_cache, pos0, shape,
            )
        } else {
            Backend::gated_attention(
                &self.gpu, q_and_gate, k, v, q_norm, k_norm, eps, rope, k_cache, v_cache, pos0,
                shape,
            )
        }
    }

    fn conv1d_silu(
        &self,
        x: &GpuTensor,
        w: &GpuTensor,
        state: &mut GpuTensor,
    ) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::conv1d_silu(self, x, w, state)
        } else {
            Backend::conv1d_silu(&self.gpu, x, w, state)
        }
    }

    fn delta_net_gates(
        &self,
        alpha: &GpuTensor,
        beta: &GpuTensor,
        ssm_a: &GpuTensor,
        dt_bias: &GpuTensor,
    ) -> Result<(GpuTensor, GpuTensor), BackendError> {
        if decode(alpha) {
            ops::delta_net_gates(self, alpha, beta, ssm_a, dt_bias)
        } else {
            Backend::delta_net_gates(&self.gpu, alpha, beta, ssm_a, dt_bias)
        }
    }

    fn delta_rule(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        g: &GpuTensor,
        beta: &GpuTensor,
        state: &mut GpuTensor,
        shape: DeltaNetShape,
    ) -> Result<GpuTensor, BackendError> {
        if decode(q) {
            ops::delta_rule(self, q, k, v, g, beta, state, shape)
        } else {
            Backend::delta_rule(&self.gpu, q, k, v, g, beta, state, shape)
        }
    }

    fn conv_qkv_norm(
        &self,
        m: &GpuTensor,
        w: &GpuTensor,
        state: &mut GpuTensor,
        shape: DeltaNetShape,
        q_scale: f32,
        eps: f32,
    ) -> Result<Qkv<GpuTensor>, BackendError> {
        if decode(m) {
            ops::conv_qkv_norm(self, m, w, state, shape, q_scale, eps)
        } else {
            Backend::conv_qkv_norm(&self.gpu, m, w, state, shape, q_scale, eps)
        }
    }

    fn gated_delta_rule(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        alpha: &GpuTensor,
        beta: &GpuTensor,
        ssm_a: &GpuTensor,
        dt_bias: &GpuTensor,
        state: &mut GpuTensor,
        shape: DeltaNetShape,
    ) -> Result<GpuTensor, BackendError> {
        if decode(q) {
            ops::gated_delta_rule(self, q, k, v, alpha, beta, ssm_a, dt_bias, state, shape)
        } else {
            Backend::gated_delta_rule(
                &self.gpu, q, k, v, alpha, beta, ssm_a, dt_bias, state, shape,
            )
        }
    }

    fn gated_rms_norm(
        &self,
        x: &GpuTensor,
        z: &GpuTensor,
        w: &GpuTensor,
        eps: f32,
    ) -> Result<GpuTensor, BackendError> {
        if decode(x) {
            ops::gated_rms_norm(self, x, z, w, eps)
        } else {
            Backend::gated_rms_norm(&self.gpu, x, z, w, eps)
        }
    }

    fn set_profiling(&self, on: bool) {
        Backend::set_profiling(&self.gpu, on);
    }

    fn take_stats(&self) -> BackendStats {
        Backend::take_stats(&self.gpu)
    }
}
