//! `--backend metal`: the wgpu backend's device, queue, buffers and recorder, with the decode
//! ops (an activation of one row) dispatched as the hand-written MSL kernels through wgpu's MSL
//! passthrough, and everything else (prefill) as the WGSL kernels.
//!
//! [`Metal`] is generic over its [`MslDevice`], so the MSL simulator of the tests runs this very
//! glue (which op goes to which kernel set, reads, the device's status) with its own device.
//!
//! A passthrough pipeline has no reflection, so each gets an explicit layout: binding 0 is the
//! parameter struct (uniform), bindings 1.. the kernel's buffers in order. wgpu's Metal backend
//! gives the buffers of a layout `[[buffer(0)]]`, `[[buffer(1)]]`, … in binding order, which is
//! how the kernels declare them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::ops::{self, Dispatch, MslDevice, WeightLayout, WeightPart};
use crate::backend::gpu::msl_kernels::{Access, MslKernel};
use crate::backend::gpu::{GpuError, GpuOptions, GpuTensor, GpuWeight, Program, Wgpu};
use crate::backend::{
    rms_norm_matmul_each, AttentionShape, Backend, BackendError, BackendStats, ConvQkvNorm,
    DeltaRule, GatedAttention, GatedDeltaRule, KvCache, PendingRead, Qkv,
};
use crate::gguf::{GgufFile, TensorInfo};
use crate::sample::Draw;

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

/// A Metal GPU as the MSL kernels see it: [`Wgpu`] on a Metal adapter plus the MSL pipelines.
pub struct MetalDevice {
    gpu: Wgpu,
    pipelines: MslPipelines,
}

/// The Metal backend: MSL kernels for the ops that have one, on `D`, and `D`'s
/// [`MslDevice::Base`] for the rest and for memory.
pub struct Metal<D: MslDevice = MetalDevice> {
    device: D,
}

impl<D: MslDevice> Metal<D> {
    /// The backend over `device` (the tests' simulator; [`Metal::new`] opens a real one).
    pub fn on(device: D) -> Metal<D> {
        Metal { device }
    }

    pub fn device(&self) -> &D {
        &self.device
    }
}

impl Metal {
    /// Opens the Metal adapter and builds the WGSL and MSL pipelines; elsewhere, says why not.
    pub fn new() -> Result<Metal, MetalError> {
        Metal::with_options(&GpuOptions::default())
    }

    /// [`Metal::new`] with the WGSL side set up by `options`.
    pub fn with_options(options: &GpuOptions) -> Result<Metal, MetalError> {
        let gpu = match Wgpu::new_metal(options) {
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
        Ok(Metal::on(MetalDevice { gpu, pipelines }))
    }

    pub fn adapter_description(&self) -> String {
        self.device.gpu.adapter_description()
    }
}

fn gpu_error(op: &'static str, error: GpuError) -> BackendError {
    BackendError::Shape {
        op,
        detail: error.to_string(),
    }
}

impl MslDevice for MetalDevice {
    type Tensor = GpuTensor;
    type Weight = GpuWeight;
    type Buffer = wgpu::Buffer;
    type Base = Wgpu;

    fn base(&self) -> &Wgpu {
        &self.gpu
    }

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

impl<D: MslDevice> Metal<D> {
    /// Decode: the activation is a single row (one token), which the MSL kernels take.
    fn decode(&self, x: &D::Tensor) -> bool {
        self.device.dims(x).0 == 1
    }
}

impl<D: MslDevice + Send + Sync> Backend for Metal<D> {
    type Tensor = D::Tensor;
    type Weight = D::Weight;

    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<D::Weight, BackendError> {
        Backend::upload_weight(self.device.base(), file, info)
    }

    fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<D::Tensor, BackendError> {
        Backend::upload(self.device.base(), rows, cols, data)
    }

    fn zeros(&self, rows: usize, cols: usize) -> D::Tensor {
        Backend::zeros(self.device.base(), rows, cols)
    }

    fn dims(&self, x: &D::Tensor) -> (usize, usize) {
        self.device.dims(x)
    }

    fn read_rows(&self, x: &D::Tensor, start: usize, count: usize) -> Vec<f32> {
        Backend::read_rows(self.device.base(), x, start, count)
    }

    fn write_rows(
        &self,
        x: &mut D::Tensor,
        start: usize,
        data: &[f32],
    ) -> Result<(), BackendError> {
        Backend::write_rows(self.device.base(), x, start, data)
    }

    fn embed(&self, table: &D::Weight, tokens: &[u32]) -> Result<D::Tensor, BackendError> {
        if tokens.len() == 1 && self.device.weight(table).cols.is_multiple_of(32) {
            ops::embed(&self.device, table, tokens)
        } else {
            Backend::embed(self.device.base(), table, tokens)
        }
    }

    fn embed_ids(&self, table: &D::Weight, ids: &D::Tensor) -> Result<D::Tensor, BackendError> {
        if self.decode(ids) && self.device.weight(table).cols.is_multiple_of(32) {
            ops::embed_ids(&self.device, table, ids)
        } else {
            Backend::embed_ids(self.device.base(), table, ids)
        }
    }

    fn argmax(&self, x: &D::Tensor) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::argmax(&self.device, x)
        } else {
            Backend::argmax(self.device.base(), x)
        }
    }

    fn matmul(&self, x: &D::Tensor, w: &D::Weight) -> Result<D::Tensor, BackendError> {
        if self.decode(x) && ops::has_gemv(&self.device, w) {
            ops::matmul(&self.device, x, w)
        } else {
            Backend::matmul(self.device.base(), x, w)
        }
    }

    fn rms_norm_matmul(
        &self,
        x: &D::Tensor,
        norm: &D::Tensor,
        eps: f32,
        w: &D::Weight,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(x) && ops::has_gemv(&self.device, w) {
            ops::rms_norm_matmul(&self.device, x, norm, eps, w)
        } else {
            Backend::rms_norm_matmul(self.device.base(), x, norm, eps, w)
        }
    }

    fn matmul_add(
        &self,
        x: &D::Tensor,
        w: &D::Weight,
        acc: &mut D::Tensor,
    ) -> Result<(), BackendError> {
        if self.decode(x) && ops::has_gemv(&self.device, w) {
            ops::matmul_add(&self.device, x, w, acc)
        } else {
            Backend::matmul_add(self.device.base(), x, w, acc)
        }
    }

    fn swiglu_matmul_add(
        &self,
        gate: &D::Tensor,
        up: &D::Tensor,
        w: &D::Weight,
        acc: &mut D::Tensor,
    ) -> Result<(), BackendError> {
        if self.decode(gate) && ops::has_gemv(&self.device, w) {
            ops::swiglu_matmul_add(&self.device, gate, up, w, acc)
        } else {
            Backend::swiglu_matmul_add(self.device.base(), gate, up, w, acc)
        }
    }

    fn rows(&self, x: &D::Tensor, start: usize, count: usize) -> Result<D::Tensor, BackendError> {
        if count == 1 {
            ops::rows(&self.device, x, start, count)
        } else {
            Backend::rows(self.device.base(), x, start, count)
        }
    }

    fn slice_cols(
        &self,
        x: &D::Tensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::slice_cols(&self.device, x, group, offset, width)
        } else {
            Backend::slice_cols(self.device.base(), x, group, offset, width)
        }
    }

    fn rms_norm(&self, x: &D::Tensor, w: &D::Tensor, eps: f32) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::rms_norm(&self.device, x, w, eps)
        } else {
            Backend::rms_norm(self.device.base(), x, w, eps)
        }
    }

    fn l2_norm(
        &self,
        x: &D::Tensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::l2_norm(&self.device, x, group, scale, eps)
        } else {
            Backend::l2_norm(self.device.base(), x, group, scale, eps)
        }
    }

    fn add(&self, x: &mut D::Tensor, y: &D::Tensor) -> Result<(), BackendError> {
        if self.decode(x) {
            ops::add(&self.device, x, y)
        } else {
            Backend::add(self.device.base(), x, y)
        }
    }

    fn swiglu(&self, gate: &D::Tensor, up: &D::Tensor) -> Result<D::Tensor, BackendError> {
        if self.decode(gate) {
            ops::swiglu(&self.device, gate, up)
        } else {
            Backend::swiglu(self.device.base(), gate, up)
        }
    }

    fn sigmoid_mul(&self, x: &D::Tensor, gate: &D::Tensor) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::sigmoid_mul(&self.device, x, gate)
        } else {
            Backend::sigmoid_mul(self.device.base(), x, gate)
        }
    }

    fn rope(
        &self,
        x: &D::Tensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::rope(&self.device, x, head_dim, rot_dims, freq_base, pos0)
        } else {
            Backend::rope(self.device.base(), x, head_dim, rot_dims, freq_base, pos0)
        }
    }

    fn attention(
        &self,
        q: &D::Tensor,
        k: &D::Tensor,
        v: &D::Tensor,
        cache: &mut KvCache<'_, D::Tensor>,
        shape: AttentionShape,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(q) {
            ops::attention(&self.device, q, k, v, cache, shape)
        } else {
            Backend::attention(self.device.base(), q, k, v, cache, shape)
        }
    }

    fn gated_attention(
        &self,
        op: &GatedAttention<'_, D::Tensor>,
        cache: &mut KvCache<'_, D::Tensor>,
    ) -> Result<Option<D::Tensor>, BackendError> {
        if self.decode(op.q_and_gate) {
            ops::gated_attention(&self.device, op, cache).map(Some)
        } else {
            self.device.base().gated_attention(op, cache)
        }
    }

    fn conv1d_silu(
        &self,
        x: &D::Tensor,
        w: &D::Tensor,
        state: &mut D::Tensor,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::conv1d_silu(&self.device, x, w, state)
        } else {
            Backend::conv1d_silu(self.device.base(), x, w, state)
        }
    }

    fn delta_net_gates(
        &self,
        alpha: &D::Tensor,
        beta: &D::Tensor,
        ssm_a: &D::Tensor,
        dt_bias: &D::Tensor,
    ) -> Result<(D::Tensor, D::Tensor), BackendError> {
        if self.decode(alpha) {
            ops::delta_net_gates(&self.device, alpha, beta, ssm_a, dt_bias)
        } else {
            Backend::delta_net_gates(self.device.base(), alpha, beta, ssm_a, dt_bias)
        }
    }

    fn delta_rule(
        &self,
        op: &DeltaRule<'_, D::Tensor>,
        state: &mut D::Tensor,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(&op.qkv.q) {
            ops::delta_rule(&self.device, op, state)
        } else {
            Backend::delta_rule(self.device.base(), op, state)
        }
    }

    fn conv_qkv_norm(
        &self,
        op: &ConvQkvNorm<'_, D::Tensor>,
        state: &mut D::Tensor,
    ) -> Result<Option<Qkv<D::Tensor>>, BackendError> {
        if self.decode(op.m) {
            ops::conv_qkv_norm(&self.device, op, state).map(Some)
        } else {
            self.device.base().conv_qkv_norm(op, state)
        }
    }

    fn gated_delta_rule(
        &self,
        op: &GatedDeltaRule<'_, D::Tensor>,
        state: &mut D::Tensor,
    ) -> Result<Option<D::Tensor>, BackendError> {
        if self.decode(&op.qkv.q) {
            ops::gated_delta_rule(&self.device, op, state).map(Some)
        } else {
            self.device.base().gated_delta_rule(op, state)
        }
    }

    fn gated_rms_norm(
        &self,
        x: &D::Tensor,
        z: &D::Tensor,
        w: &D::Tensor,
        eps: f32,
    ) -> Result<D::Tensor, BackendError> {
        if self.decode(x) {
            ops::gated_rms_norm(&self.device, x, z, w, eps)
        } else {
            Backend::gated_rms_norm(self.device.base(), x, z, w, eps)
        }
    }

    fn rms_norm_matmuls<const N: usize>(
        &self,
        x: &D::Tensor,
        norm: &D::Tensor,
        eps: f32,
        ws: [&D::Weight; N],
    ) -> Result<[D::Tensor; N], BackendError> {
        if self.decode(x) && ws.iter().all(|w| ops::has_gemv(&self.device, w)) {
            rms_norm_matmul_each(self, x, norm, eps, ws)
        } else {
            self.device.base().rms_norm_matmuls(x, norm, eps, ws)
        }
    }

    /// The WGSL kernels' (MSL has no sampling kernels).
    fn sample(
        &self,
        logits: &mut D::Tensor,
        recent: &mut D::Tensor,
        slot: usize,
        draw: &Draw,
    ) -> Result<D::Tensor, BackendError> {
        self.device.base().sample(logits, recent, slot, draw)
    }

    fn start_read(&self, x: &D::Tensor) -> PendingRead {
        self.device.base().start_read(x)
    }

    fn status(&self) -> Result<(), BackendError> {
        self.device.base().status()
    }

    fn synchronize(&self) {
        self.device.base().synchronize()
    }

    fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.device.base().run(work)
    }

    fn set_profiling(&self, on: bool) {
        Backend::set_profiling(self.device.base(), on);
    }

    fn take_stats(&self) -> BackendStats {
        Backend::take_stats(self.device.base())
    }
}
