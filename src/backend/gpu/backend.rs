//! [`Backend`] for [`Wgpu`]: each op goes to its MSL kernel where an MSL kernel set is
//! installed and has one for the op's shape (one token: decode), else to the WGSL kernels;
//! both record into the same pass on the same buffers, and their errors map to
//! [`BackendError`] alike.

use std::sync::Arc;

use super::msl_kernels::MslFormat;
use super::msl_ops::{self, Dispatch, MslDevice, MslLauncher, WeightLayout, WeightPart};
use super::{GpuError, GpuTensor, GpuWeight, Storage, Wgpu};
use crate::backend::{
    rms_norm_matmul_each, sample_on_host, AttentionShape, Backend, BackendError, BackendStats,
    ConvQkvNorm, DeltaRule, GatedAttention, GatedDeltaRule, KvCache, PendingRead, Qkv,
};
use crate::gguf::{GgufFile, TensorInfo};
use crate::sample::Draw;

impl GpuError {
    /// The trait's error for a failure of `op`; the device's own failures (no memory, a lost
    /// device, a failed readback) keep their message.
    fn into_backend(self, op: &'static str) -> BackendError {
        match self {
            GpuError::Shape { op, detail } => BackendError::Shape { op, detail },
            GpuError::TokenOutOfRange { token, vocab } => {
                BackendError::TokenOutOfRange { token, vocab }
            }
            other => BackendError::Device(format!("{op}: {other}")),
        }
    }
}

impl Wgpu {
    /// For the trait's infallible ops, and kernels that failed on the device: remembers `error`
    /// so that every later op and readback fails with it.
    fn poison(&self, error: &GpuError) {
        log::error!("wgpu: {error}");
        if let Ok(mut first) = self.device_error.lock() {
            first.get_or_insert_with(|| error.to_string());
        }
    }

    /// The MSL kernel set, where one is installed and `has_kernel` (the op's shape has one).
    fn msl_if(&self, has_kernel: bool) -> Option<MslOn<'_>> {
        let launcher = self.msl.as_deref().filter(|_| has_kernel)?;
        Some(MslOn {
            gpu: self,
            launcher,
        })
    }

    /// [`Wgpu::msl_if`] for an op on `x`: the MSL kernels take one row (a decode step).
    fn msl_row(&self, x: &GpuTensor) -> Option<MslOn<'_>> {
        self.msl_if(x.rows == 1)
    }

    /// [`Wgpu::msl_row`] for a projection of `x` by `ws`, whose formats need MSL GEMVs.
    fn msl_gemv(&self, x: &GpuTensor, ws: &[&GpuWeight]) -> Option<MslOn<'_>> {
        let gemv = |w: &&GpuWeight| MslFormat::from_ggml(w.format.ggml_type()).is_some();
        self.msl_if(x.rows == 1 && ws.iter().all(gemv))
    }

    /// [`Wgpu::msl_if`] for embedding `rows` tokens from `table`, whose rows the MSL kernel takes
    /// in whole 32-value units.
    fn msl_embed(&self, table: &GpuWeight, rows: usize) -> Option<MslOn<'_>> {
        self.msl_if(rows == 1 && table.cols.is_multiple_of(32))
    }
}

/// The GPU as the MSL launch code sees it: the backend's tensors and weights, each kernel
/// launched by its [`MslLauncher`].
struct MslOn<'a> {
    gpu: &'a Wgpu,
    launcher: &'a dyn MslLauncher,
}

impl MslDevice for MslOn<'_> {
    type Tensor = GpuTensor;
    type Weight = GpuWeight;
    type Buffer = wgpu::Buffer;

    fn dims(&self, x: &GpuTensor) -> (usize, usize) {
        x.dims()
    }

    fn storage(&self, x: &GpuTensor) -> Storage {
        x.storage
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
            .map_err(|e| e.into_backend("output"))
    }

    /// A kernel that failed on the device (lost, or its buffers not read back) leaves its
    /// outputs unknown, so it poisons the backend as a failed readback does.
    fn dispatch(&self, d: &Dispatch<'_, wgpu::Buffer>) -> Result<(), BackendError> {
        let op = d.kernel.entry();
        let launched = self
            .gpu
            .check_device()
            .and_then(|()| self.launcher.launch(self.gpu, d));
        launched.map_err(|e| {
            if matches!(e, GpuError::Device(_) | GpuError::Readback(_)) {
                self.gpu.poison(&e);
            }
            e.into_backend(op)
        })
    }
}

/// Trait methods that each run their op on its MSL kernel where `pick(cond)` (a `Wgpu::msl_*`
/// method) gives the kernel set, else on the WGSL kernels, whose errors then name the op. An
/// `Option` output (a fused op that a backend may lack) is always `Some` here.
macro_rules! routed {
    ($(
        fn $op:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty where $pick:ident($($cond:expr),*);
    )*) => {$(
        fn $op(&self, $($arg: $ty),*) -> Result<$out, BackendError> {
            match self.$pick($($cond),*) {
                Some(msl) => msl_ops::$op(&msl, $($arg),*),
                None => Wgpu::$op(self, $($arg),*).map_err(|e| e.into_backend(stringify!($op))),
            }
            .map(Into::into)
        }
    )*};
}

impl Backend for Wgpu {
    type Tensor = GpuTensor;
    type Weight = GpuWeight;

    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<GpuWeight, BackendError> {
        let cols = info.dims.first().copied().unwrap_or(0) as usize;
        let rows = info.dims.iter().skip(1).product::<u64>() as usize;
        Wgpu::upload_weight(
            self,
            &info.name,
            info.ggml_type,
            rows,
            cols,
            file.tensor_data(info),
        )
        .map_err(|e| e.into_backend("upload_weight"))
    }

    fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<GpuTensor, BackendError> {
        Wgpu::upload(self, rows, cols, data).map_err(|e| e.into_backend("upload"))
    }

    /// A tensor too large for a binding poisons the backend (the trait's `zeros` cannot fail):
    /// the next op or readback reports it.
    fn zeros(&self, rows: usize, cols: usize) -> GpuTensor {
        Wgpu::zeros(self, rows, cols).unwrap_or_else(|e| {
            self.poison(&e);
            self.placeholder(rows, cols)
        })
    }

    /// In f16 where [`GpuOptions::f16_kv_cache`](super::GpuOptions::f16_kv_cache) is on (see
    /// [`Wgpu::kv_cache`]); a cache too large for a binding poisons the backend as in `zeros`.
    fn kv_cache(&self, rows: usize, cols: usize) -> GpuTensor {
        Wgpu::kv_cache(self, rows, cols).unwrap_or_else(|e| {
            self.poison(&e);
            self.placeholder(rows, cols)
        })
    }

    fn dims(&self, x: &GpuTensor) -> (usize, usize) {
        x.dims()
    }

    /// A failed readback poisons the backend and yields no values.
    fn read_rows(&self, x: &GpuTensor, start: usize, count: usize) -> Vec<f32> {
        Wgpu::read_rows(self, x, start, count).unwrap_or_else(|e| {
            self.poison(&e);
            Vec::new()
        })
    }

    /// A failed readback poisons the backend and yields no values.
    fn start_read(&self, x: &GpuTensor) -> PendingRead {
        let size = x.row_bytes(x.rows);
        if size == 0 {
            return PendingRead::ready(Vec::new());
        }
        let started = self
            .check_device()
            .and_then(|()| self.recorder.start_read(&x.buffer, 0, size));
        let sink = Arc::clone(&self.device_error);
        let storage = x.storage;
        match started {
            Ok(read) => PendingRead::new(move || match read.wait() {
                Ok(bytes) => storage.values(&bytes),
                Err(e) => {
                    log::error!("wgpu: {e}");
                    if let Ok(mut first) = sink.lock() {
                        first.get_or_insert_with(|| e.to_string());
                    }
                    Vec::new()
                }
            }),
            Err(e) => {
                self.poison(&e);
                PendingRead::ready(Vec::new())
            }
        }
    }

    /// On the GPU where [`Wgpu::samples_on_gpu`] (WGSL: MSL has no sampling kernels), else on
    /// the host (a full-vocabulary draw).
    fn sample(
        &self,
        logits: &mut GpuTensor,
        recent: &mut GpuTensor,
        slot: usize,
        draw: &Draw,
    ) -> Result<GpuTensor, BackendError> {
        if Wgpu::samples_on_gpu(draw) {
            Wgpu::sample(self, logits, recent, slot, draw).map_err(|e| e.into_backend("sample"))
        } else {
            sample_on_host(self, logits, recent, slot, draw)
        }
    }

    fn write_rows(
        &self,
        x: &mut GpuTensor,
        start: usize,
        data: &[f32],
    ) -> Result<(), BackendError> {
        Wgpu::write_rows(self, x, start, data).map_err(|e| e.into_backend("write_rows"))
    }

    /// MSL: one normed GEMV per weight (each norms x in its own loads).
    fn rms_norm_matmuls<const N: usize>(
        &self,
        x: &GpuTensor,
        norm: &GpuTensor,
        eps: f32,
        ws: [&GpuWeight; N],
    ) -> Result<[GpuTensor; N], BackendError> {
        if self.msl_gemv(x, &ws).is_some() {
            return rms_norm_matmul_each(self, x, norm, eps, ws);
        }
        Wgpu::rms_norm_matmuls(self, x, norm, eps, &ws)
            .map(crate::backend::one_per_weight)
            .map_err(|e| e.into_backend("rms_norm_matmuls"))
    }

    routed! {
        fn embed(table: &GpuWeight, tokens: &[u32]) -> GpuTensor
            where msl_embed(table, tokens.len());
        fn embed_ids(table: &GpuWeight, ids: &GpuTensor) -> GpuTensor
            where msl_embed(table, ids.rows);
        fn argmax(x: &GpuTensor) -> GpuTensor where msl_row(x);
        fn matmul(x: &GpuTensor, w: &GpuWeight) -> GpuTensor where msl_gemv(x, &[w]);
        fn rms_norm_matmul(x: &GpuTensor, norm: &GpuTensor, eps: f32, w: &GpuWeight) -> GpuTensor
            where msl_gemv(x, &[w]);
        fn matmul_add(x: &GpuTensor, w: &GpuWeight, acc: &mut GpuTensor) -> ()
            where msl_gemv(x, &[w]);
        fn swiglu_matmul_add(gate: &GpuTensor, up: &GpuTensor, w: &GpuWeight, acc: &mut GpuTensor)
            -> () where msl_gemv(gate, &[w]);
        fn rows(x: &GpuTensor, start: usize, count: usize) -> GpuTensor where msl_if(count == 1);
        fn slice_cols(x: &GpuTensor, group: usize, offset: usize, width: usize) -> GpuTensor
            where msl_row(x);
        fn rms_norm(x: &GpuTensor, w: &GpuTensor, eps: f32) -> GpuTensor where msl_row(x);
        fn l2_norm(x: &GpuTensor, group: usize, scale: f32, eps: f32) -> GpuTensor
            where msl_row(x);
        fn add(x: &mut GpuTensor, y: &GpuTensor) -> () where msl_row(x);
        fn swiglu(gate: &GpuTensor, up: &GpuTensor) -> GpuTensor where msl_row(gate);
        fn sigmoid_mul(x: &GpuTensor, gate: &GpuTensor) -> GpuTensor where msl_row(x);
        fn rope(x: &GpuTensor, head_dim: usize, rot_dims: usize, freq_base: f32, pos0: usize)
            -> GpuTensor where msl_row(x);
        fn attention(
            q: &GpuTensor,
            k: &GpuTensor,
            v: &GpuTensor,
            cache: &mut KvCache<'_, GpuTensor>,
            shape: AttentionShape
        ) -> GpuTensor where msl_row(q);
        fn gated_attention(op: &GatedAttention<'_, GpuTensor>, cache: &mut KvCache<'_, GpuTensor>)
            -> Option<GpuTensor> where msl_row(op.q_and_gate);
        fn conv1d_silu(x: &GpuTensor, w: &GpuTensor, state: &mut GpuTensor) -> GpuTensor
            where msl_row(x);
        fn delta_net_gates(
            alpha: &GpuTensor,
            beta: &GpuTensor,
            ssm_a: &GpuTensor,
            dt_bias: &GpuTensor
        ) -> (GpuTensor, GpuTensor) where msl_row(alpha);
        fn delta_rule(op: &DeltaRule<'_, GpuTensor>, state: &mut GpuTensor) -> GpuTensor
            where msl_row(&op.qkv.q);
        fn conv_qkv_norm(op: &ConvQkvNorm<'_, GpuTensor>, state: &mut GpuTensor)
            -> Option<Qkv<GpuTensor>> where msl_row(op.m);
        fn gated_delta_rule(op: &GatedDeltaRule<'_, GpuTensor>, state: &mut GpuTensor)
            -> Option<GpuTensor> where msl_row(&op.qkv.q);
        fn gated_rms_norm(x: &GpuTensor, z: &GpuTensor, w: &GpuTensor, eps: f32) -> GpuTensor
            where msl_row(x);
    }

    fn status(&self) -> Result<(), BackendError> {
        match self.check_device() {
            Err(GpuError::Device(first)) => Err(BackendError::Device(first)),
            other => other.map_err(|e| e.into_backend("device")),
        }
    }

    fn synchronize(&self) {
        if let Err(e) = self.recorder.submit_all() {
            self.poison(&e);
        } else if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
            self.poison(&GpuError::Readback(e.to_string()));
        }
    }

    /// Ops only record work, from any thread.
    fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        work()
    }

    fn set_profiling(&self, on: bool) {
        if let Err(e) = self.recorder.set_profiling(on) {
            self.poison(&e);
        }
    }

    /// A failure to read the profile poisons the backend and yields no counters.
    fn take_stats(&self) -> BackendStats {
        self.recorder.take_stats().unwrap_or_else(|e| {
            self.poison(&e);
            BackendStats::default()
        })
    }
}
