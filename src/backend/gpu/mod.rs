//! The GPU backend: the op set of the model on any GPU that wgpu drives (Vulkan, Metal, DX12),
//! with two kernel sets: the WGSL kernels everywhere and, where an [`MslLauncher`] is installed
//! (on a Metal adapter: `backend::metal`), the hand-written MSL kernels for the ops of one token
//! (decode), which [`backend`] routes to them.
//!
//! Weights are uploaded once as the file stores them (quantized blocks included) and decoded by
//! the kernels; tensors larger than one storage binding are split into row ranges. Ops record
//! dispatches into one compute pass; only a readback submits and waits (see [`recorder`]).

mod attention_prefill;
mod backend;
mod cooperative;
mod delta_chunks;
mod error;
mod heap;
mod kernel_build;
mod kernels;
mod memory;
pub mod msl_kernels;
pub mod msl_ops;
mod ops;
mod options;
mod profiler;
mod program;
mod recorder;
mod sampling;

use std::sync::{Arc, Mutex};

pub use error::GpuError;
pub use heap::HeapBudget;
pub use kernels::{kernel_sources, KernelSource, WeightFormat};
pub use memory::{GpuTensor, GpuWeight, Storage};
pub use msl_ops::MslLauncher;
pub use ops::{ATTENTION_PREFILL_MIN_ROWS, DELTA_RULE_PREFILL_MIN_ROWS, GEMM_MIN_ROWS};
pub use options::{GpuOptions, WeightCopies, AUTO_COPIES_SHARE};
pub use sampling::MAX_TOP_K;

pub(crate) use kernel_build::validated_pipeline;
use kernels::{Kernel, Pipelines};
pub(crate) use program::Program;
use recorder::{Binding, Recorder};

/// The device, its pipelines and the recorder of the current forward.
pub struct Wgpu {
    device: wgpu::Device,
    adapter: wgpu::AdapterInfo,
    pipelines: Pipelines,
    recorder: Recorder,
    /// Bytes one storage binding may span on this device.
    binding_limit: u64,
    /// Device bytes allocated and not given back (weights, tensors, pooled buffers: those only by
    /// [`Wgpu::give_back_memory`]).
    allocated_bytes: std::sync::atomic::AtomicU64,
    /// A cap on `allocated_bytes` below the device's own ([`GpuOptions::memory_limit`]).
    memory_limit: Option<u64>,
    /// The first error wgpu reported outside an error scope; every later op fails with it.
    device_error: Arc<Mutex<Option<String>>>,
    /// Freed activation buffers, reused by later op outputs.
    buffer_pool: Arc<memory::BufferPool>,
    /// RoPE inverse-frequency tables by (rotated dims, f32 bits of the base).
    rope_tables: Mutex<std::collections::HashMap<(usize, u32), wgpu::Buffer>>,
    /// Whether prefill GEMMs run on cooperative matrices (tensor cores).
    cooperative_matrix: bool,
    /// Whether the chunked delta rule runs on cooperative matrices
    /// ([`GpuOptions::cooperative_delta_rule`]).
    cooperative_delta_rule: bool,
    /// Whether a prefill's delta rule runs as one scan per state column
    /// ([`GpuOptions::chunked_delta_rule`] off, and subgroups the scan can use).
    delta_rule_scan: bool,
    /// Whether prefill attention runs on cooperative matrices
    /// ([`GpuOptions::cooperative_attention`]).
    cooperative_attention: bool,
    /// The normed input of the last projection, reused by the next of the same input.
    last_normed: Mutex<Option<ops::LastNormed>>,
    /// Whether the GEMVs of formats with an integer span reader take quantized activations
    /// ([`GpuOptions::integer_gemv`]).
    integer_gemv: bool,
    /// The quantized input of the last integer GEMV, reused by the next of the same input.
    last_quantized: Mutex<Option<ops::LastQuantized>>,
    /// The f16 copy of the last cooperative GEMM's input, reused by the next GEMM of the same
    /// input (a layer's projections of one normed input).
    last_half: Mutex<Option<ops::LastHalf>>,
    /// Bytes the GEMMs may still spend on their weights' f16 copies
    /// ([`GpuOptions::f16_weight_copies`]); none once an allocation for one fails.
    f16_copies_left: std::sync::atomic::AtomicU64,
    /// Whether a copy must also leave the device's memory within [`AUTO_COPIES_SHARE`] of its
    /// budget ([`WeightCopies::Auto`]).
    f16_copies_auto: bool,
    /// The weights' f16 copies kept for the cooperative GEMM ([`GpuOptions::f16_weight_copies`]),
    /// one per chunk of rows the GEMM takes, by weight part and first row of the chunk in it;
    /// all let go at once when memory runs out ([`Wgpu::give_back_memory`]).
    f16_copies: Mutex<std::collections::HashMap<(wgpu::Buffer, usize), Arc<memory::HalfMatrix>>>,
    /// Decode attention by query head ([`GpuOptions::per_head_attention`]).
    per_head_attention: bool,
    /// KV caches in f16 ([`GpuOptions::f16_kv_cache`]).
    f16_kv_cache: bool,
    /// Op classes not dispatched ([`GpuOptions::left_out`]).
    left_out: Vec<String>,
    /// The MSL kernel set, when one is installed ([`Wgpu::with_msl`]).
    msl: Option<Arc<dyn MslLauncher>>,
    /// Rows per buffer of an uploaded weight at most, below what the binding limit allows
    /// ([`Wgpu::with_weight_parts`]).
    max_weight_part_rows: usize,
}

/// Whether `device` has subgroups whose every size the delta-rule scan divides into columns.
fn scan_subgroups(device: &wgpu::Device, adapter: &wgpu::AdapterInfo) -> bool {
    let lanes = kernels::DELTA_RULE_SCAN_LANES as u32;
    device.features().contains(wgpu::Features::SUBGROUP)
        && adapter.subgroup_min_size >= lanes
        && adapter.subgroup_min_size.is_multiple_of(lanes)
}

/// The adapter [`Wgpu::new`] would open, without opening it: a caller can tell a software
/// rasterizer (`device_type` Cpu, e.g. lavapipe) before it starts anything long.
pub fn adapter_info() -> Result<wgpu::AdapterInfo, GpuError> {
    Ok(request_adapter(None)?.get_info())
}

/// The best adapter wgpu finds among `backends` (default: all, narrowed by `WGPU_BACKEND`).
fn request_adapter(backends: Option<wgpu::Backends>) -> Result<wgpu::Adapter, GpuError> {
    let mut instance_desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if let Some(backends) = backends {
        instance_desc.backends = backends;
    }
    // Fail creating a resource rather than overcommitting device memory.
    instance_desc.memory_budget_thresholds.for_resource_creation = Some(95);
    let instance = wgpu::Instance::new(instance_desc);
    pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
    }))
    .map_err(|e| GpuError::NoAdapter(e.to_string()))
}

impl Wgpu {
    /// Opens the best adapter wgpu finds (`WGPU_BACKEND` and `WGPU_ADAPTER_NAME` narrow the
    /// choice), with every limit the adapter offers, and builds all pipelines.
    pub fn new() -> Result<Wgpu, GpuError> {
        Wgpu::with_options(&GpuOptions::default())
    }

    /// [`Wgpu::new`] set up by `options`.
    pub fn with_options(options: &GpuOptions) -> Result<Wgpu, GpuError> {
        Wgpu::open(options, None)
    }

    /// [`Wgpu::new`] with the kernels that need no subgroup operations even where the adapter
    /// has them (tests run both variants on one adapter).
    pub fn without_subgroups() -> Result<Wgpu, GpuError> {
        Wgpu::with_options(&GpuOptions {
            subgroups: false,
            ..GpuOptions::default()
        })
    }

    /// This backend with the decode GEMVs on integer activations (the default) or on f32 ones.
    pub fn with_integer_gemv(mut self, on: bool) -> Wgpu {
        self.integer_gemv = on;
        self
    }

    /// This backend with the MSL kernels, launched by `launcher`, for the ops of one token that
    /// have one (the WGSL kernels keep the rest).
    pub fn with_msl(mut self, launcher: Arc<dyn MslLauncher>) -> Wgpu {
        assert!(
            self.pipelines.q6_k_block_bytes() == crate::quant::GgmlType::Q6_K.block_bytes(),
            "MSL kernels read Q6_K blocks as the file lays them out: open without q6_k_aligned"
        );
        self.msl = Some(launcher);
        self
    }

    /// This backend with uploaded weights split into buffers of at most `max_rows` rows, as
    /// weights past the binding limit are (tests exercise split weights on small models).
    pub fn with_weight_parts(mut self, max_rows: usize) -> Wgpu {
        self.max_weight_part_rows = max_rows;
        self
    }

    /// Whether the decode GEMVs of formats with an integer span reader take 14-bit activations.
    pub fn integer_gemv(&self) -> bool {
        self.integer_gemv
    }

    /// Whether prefill GEMMs multiply in f16 (cooperative matrices) rather than f32 tiles.
    pub fn gemm_in_f16(&self) -> bool {
        self.cooperative_matrix
    }

    /// Whether a prefill's delta rule multiplies in f16 (the chunked kernel on cooperative
    /// matrices, when the scan is off) where its shape allows, rather than in f32.
    pub fn delta_rule_in_f16(&self) -> bool {
        self.cooperative_delta_rule && !self.delta_rule_scan
    }

    /// Whether a prefill's delta rule runs as one scan per state column where k_dim allows.
    pub fn delta_rule_scans(&self) -> bool {
        self.delta_rule_scan
    }

    /// Whether prefill attention multiplies in f16 (cooperative matrices) rather than f32.
    pub fn attention_in_f16(&self) -> bool {
        self.cooperative_attention
    }

    /// [`Wgpu::with_options`] on a Metal adapter only, with MSL passthrough shaders where it has
    /// them (for the Metal backend).
    pub(crate) fn new_metal(options: &GpuOptions) -> Result<Wgpu, GpuError> {
        Wgpu::open(options, Some(wgpu::Backends::METAL))
    }

    fn open(options: &GpuOptions, backends: Option<wgpu::Backends>) -> Result<Wgpu, GpuError> {
        let subgroups = options.subgroups;
        let adapter = request_adapter(backends)?;
        let info = adapter.get_info();
        // Only optional speed-ups: kernels and the profile fall back when one is missing.
        let mut wanted =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        if subgroups {
            wanted |= wgpu::Features::SUBGROUP;
        }
        let mut cooperative = match cooperative::support(&adapter, options) {
            Ok(shape) => Some(shape),
            Err(reason) => {
                log::info!("wgpu: prefill GEMM in f32 tiles (no cooperative matrices: {reason})");
                None
            }
        };
        if info.backend == wgpu::Backend::Metal {
            wanted |= wgpu::Features::PASSTHROUGH_SHADERS;
        }
        let request = |with_cooperative: bool| {
            let features = if with_cooperative {
                wanted | cooperative::FEATURES
            } else {
                wanted
            };
            pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("qwen35"),
                required_features: adapter.features() & features,
                required_limits: adapter.limits(),
                experimental_features: cooperative::experimental_features(with_cooperative),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            }))
        };
        // The cooperative features are experimental in wgpu: a device refused with them is
        // asked for again without.
        let granted = match request(cooperative.is_some()) {
            Err(e) if cooperative.is_some() => {
                log::warn!(
                    "wgpu: prefill GEMM in f32 tiles (device refused cooperative matrices: {e})"
                );
                cooperative = None;
                request(false)
            }
            granted => granted,
        };
        let (device, queue) = granted.map_err(|e| GpuError::RequestDevice {
            adapter: info.name.clone(),
            reason: e.to_string(),
        })?;
        let device_error = Arc::new(Mutex::new(None));
        let sink = Arc::clone(&device_error);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            log::error!("wgpu: {error}");
            if let Ok(mut first) = sink.lock() {
                first.get_or_insert_with(|| error.to_string());
            }
        }));
        // The loss explains every error after it, so it replaces whichever came first.
        let sink = Arc::clone(&device_error);
        device.set_device_lost_callback(move |reason, message| {
            let lost = format!("the GPU device was lost ({reason:?}) {message}");
            log::error!("wgpu: {lost}");
            if let Ok(mut first) = sink.lock() {
                *first = Some(lost.trim_end().to_string());
            }
        });
        let mut pipelines = Pipelines::build(&device, &info, options, cooperative)?;
        let delta_rule_scan = !options.chunked_delta_rule && scan_subgroups(&device, &info);
        if delta_rule_scan {
            pipelines.add(&device, Kernel::DeltaRuleScan)?;
        }
        let cooperative_delta_rule = cooperative.is_some()
            && options.cooperative_matrix
            && options.cooperative_delta_rule
            && cooperative::add_delta_rule_pipeline(&mut pipelines, &device);
        let cooperative_attention = cooperative.is_some()
            && options.cooperative_attention
            && cooperative::add_pipelines(&mut pipelines, &device, true);
        let cooperative = cooperative.is_some()
            && options.cooperative_matrix
            && cooperative::add_pipelines(&mut pipelines, &device, false);
        let limits = device.limits();
        let binding_limit = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        log::info!(
            "wgpu: {} ({:?}, {:?}), storage bindings up to {binding_limit} bytes, subgroups of \
             {}..={} invocations",
            info.name,
            info.backend,
            info.device_type,
            info.subgroup_min_size,
            info.subgroup_max_size
        );
        let mut gpu = Wgpu {
            recorder: Recorder::new(device.clone(), queue),
            device,
            adapter: info,
            pipelines,
            binding_limit,
            allocated_bytes: 0.into(),
            memory_limit: options.memory_limit,
            device_error,
            buffer_pool: Default::default(),
            rope_tables: Mutex::new(Default::default()),
            cooperative_matrix: cooperative,
            cooperative_delta_rule,
            delta_rule_scan,
            cooperative_attention,
            last_normed: Mutex::new(None),
            integer_gemv: options.integer_gemv,
            last_quantized: Mutex::new(None),
            last_half: Mutex::new(None),
            f16_copies_left: 0.into(),
            f16_copies_auto: false,
            f16_copies: Mutex::new(Default::default()),
            per_head_attention: options.per_head_attention,
            f16_kv_cache: options.f16_kv_cache,
            left_out: options.left_out.clone(),
            msl: None,
            max_weight_part_rows: usize::MAX,
        };
        if cooperative {
            gpu.cooperative_matrix = gpu.cooperative_gemm_agrees();
            // A driver that gets the GEMM wrong is not trusted with the attention either.
            gpu.cooperative_attention &= gpu.cooperative_matrix;
        }
        // After the check, whose GEMMs keep no copies.
        gpu.f16_copies_left = match options.f16_weight_copies {
            WeightCopies::Bytes(bytes) => bytes,
            WeightCopies::Auto => u64::MAX,
        }
        .into();
        gpu.f16_copies_auto = options.f16_weight_copies == WeightCopies::Auto;
        match gpu.device_heap() {
            Some(heap) => log::info!(
                "wgpu: GPU memory: {} bytes this process may use, {} used",
                heap.budget,
                heap.usage
            ),
            None => log::info!("wgpu: GPU memory: the driver does not say how much is free"),
        }
        log::info!(
            "wgpu: prefill attention {}",
            if gpu.cooperative_attention {
                "on cooperative matrices (f16 products, f32 softmax)"
            } else {
                "in f32"
            }
        );
        Ok(gpu)
    }

    /// The adapter's name, backend and type, e.g. "llvmpipe (LLVM 15.0.6), Vulkan, Cpu".
    pub fn adapter_description(&self) -> String {
        format!(
            "{}, {:?}, {:?}",
            self.adapter.name, self.adapter.backend, self.adapter.device_type
        )
    }

    /// Bytes one storage binding may span (tensors above it are split into row ranges).
    pub fn binding_limit(&self) -> u64 {
        self.binding_limit
    }

    /// Submits the recorded work without waiting for it.
    pub fn flush(&self) -> Result<(), GpuError> {
        self.recorder.flush()
    }

    /// The device, e.g. to share it or (tests) to destroy it and see a lost device reported.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Records a dispatch of a pipeline built outside this backend (the MSL passthrough
    /// pipelines of a Metal adapter) into the same pass as the WGSL ones; the backend has
    /// checked the device.
    pub(crate) fn record_program(
        &self,
        pipeline: &wgpu::ComputePipeline,
        program: Program,
        params: &[u32],
        buffers: &[Binding<'_>],
        workgroups: [usize; 3],
        bytes_read: u64,
    ) -> Result<(), GpuError> {
        self.recorder.dispatch_program(
            pipeline, program, None, params, buffers, workgroups, bytes_read,
        )
    }

    /// Fails with the first error wgpu reported asynchronously, if any.
    fn check_device(&self) -> Result<(), GpuError> {
        match self.device_error.lock() {
            Ok(first) => match first.as_ref() {
                Some(message) => Err(GpuError::Device(message.clone())),
                None => Ok(()),
            },
            Err(_) => Err(GpuError::Device("error sink poisoned".into())),
        }
    }
}

/// The device for the unit tests of the backend's modules, or None without an adapter (a
/// failure with QWEN35_REQUIRE_GPU=1).
#[cfg(test)]
fn test_gpu() -> Option<Wgpu> {
    test_gpu_with(&GpuOptions::default())
}

/// [`test_gpu`] opened with `options`.
#[cfg(test)]
fn test_gpu_with(options: &GpuOptions) -> Option<Wgpu> {
    match Wgpu::with_options(options) {
        Ok(gpu) => Some(gpu),
        Err(e) if std::env::var("QWEN35_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("QWEN35_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(_) => None,
    }
}
