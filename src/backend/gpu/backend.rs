//! [`Backend`] for [`Wgpu`]: the trait's ops over the inherent ones, errors mapped to
//! [`BackendError`].

use std::sync::Arc;

use super::{GpuError, GpuTensor, GpuWeight, Wgpu};
use crate::backend::sample_on_host;
use crate::backend::{
    AttentionShape, Backend, BackendError, BackendStats, ConvQkvNorm, DeltaRule, GatedAttention,
    GatedDeltaRule, KvCache, PendingRead, Qkv,
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
    /// For the trait's infallible ops: remembers `error` so that every later op and readback
    /// fails with it.
    fn poison(&self, error: GpuError) {
        log::error!("wgpu: {error}");
        if let Ok(mut first) = self.device_error.lock() {
            first.get_or_insert_with(|| error.to_string());
        }
    }
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
            self.poison(e);
            self.placeholder(rows, cols)
        })
    }

    fn dims(&self, x: &GpuTensor) -> (usize, usize) {
        x.dims()
    }

    /// A failed readback poisons the backend and yields no values.
    fn read_rows(&self, x: &GpuTensor, start: usize, count: usize) -> Vec<f32> {
        Wgpu::read_rows(self, x, start, count).unwrap_or_else(|e| {
            self.poison(e);
            Vec::new()
        })
    }

    /// A failed readback poisons the backend and yields no values.
    fn start_read(&self, x: &GpuTensor) -> PendingRead {
        let size = (x.len() * 4) as u64;
        if size == 0 {
            return PendingRead::ready(Vec::new());
        }
        let started = self
            .check_device()
            .and_then(|()| self.recorder.start_read(&x.buffer, 0, size));
        let sink = Arc::clone(&self.device_error);
        match started {
            Ok(read) => PendingRead::new(move || match read.wait() {
                Ok(bytes) => bytemuck::pod_collect_to_vec(&bytes),
                Err(e) => {
                    log::error!("wgpu: {e}");
                    if let Ok(mut first) = sink.lock() {
                        first.get_or_insert_with(|| e.to_string());
                    }
                    Vec::new()
                }
            }),
            Err(e) => {
                self.poison(e);
                PendingRead::ready(Vec::new())
            }
        }
    }

    fn embed_ids(&self, table: &GpuWeight, ids: &GpuTensor) -> Result<GpuTensor, BackendError> {
        Wgpu::embed_ids(self, table, ids).map_err(|e| e.into_backend("embed_ids"))
    }

    fn argmax(&self, x: &GpuTensor) -> Result<GpuTensor, BackendError> {
        Wgpu::argmax(self, x).map_err(|e| e.into_backend("argmax"))
    }

    /// On the GPU where [`Wgpu::samples_on_gpu`], else on the host (a full-vocabulary draw).
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

    fn embed(&self, table: &GpuWeight, tokens: &[u32]) -> Result<GpuTensor, BackendError> {
        Wgpu::embed(self, table, tokens).map_err(|e| e.into_backend("embed"))
    }

    fn matmul(&self, x: &GpuTensor, w: &GpuWeight) -> Result<GpuTensor, BackendError> {
        Wgpu::matmul(self, x, w).map_err(|e| e.into_backend("matmul"))
    }

    fn rms_norm_matmul(
        &self,
        x: &GpuTensor,
        norm: &GpuTensor,
        eps: f32,
        w: &GpuWeight,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::rms_norm_matmul(self, x, norm, eps, w).map_err(|e| e.into_backend("rms_norm_matmul"))
    }

    fn rms_norm_matmuls<const N: usize>(
        &self,
        x: &GpuTensor,
        norm: &GpuTensor,
        eps: f32,
        ws: [&GpuWeight; N],
    ) -> Result<[GpuTensor; N], BackendError> {
        Wgpu::rms_norm_matmuls(self, x, norm, eps, &ws)
            .map(crate::backend::one_per_weight)
            .map_err(|e| e.into_backend("rms_norm_matmuls"))
    }

    fn matmul_add(
        &self,
        x: &GpuTensor,
        w: &GpuWeight,
        acc: &mut GpuTensor,
    ) -> Result<(), BackendError> {
        Wgpu::matmul_add(self, x, w, acc).map_err(|e| e.into_backend("matmul_add"))
    }

    fn swiglu_matmul_add(
        &self,
        gate: &GpuTensor,
        up: &GpuTensor,
        w: &GpuWeight,
        acc: &mut GpuTensor,
    ) -> Result<(), BackendError> {
        Wgpu::swiglu_matmul_add(self, gate, up, w, acc)
            .map_err(|e| e.into_backend("swiglu_matmul_add"))
    }

    fn rows(&self, x: &GpuTensor, start: usize, count: usize) -> Result<GpuTensor, BackendError> {
        Wgpu::rows(self, x, start, count).map_err(|e| e.into_backend("rows"))
    }

    fn slice_cols(
        &self,
        x: &GpuTensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::slice_cols(self, x, group, offset, width).map_err(|e| e.into_backend("slice_cols"))
    }

    fn rms_norm(&self, x: &GpuTensor, w: &GpuTensor, eps: f32) -> Result<GpuTensor, BackendError> {
        Wgpu::rms_norm(self, x, w, eps).map_err(|e| e.into_backend("rms_norm"))
    }

    fn l2_norm(
        &self,
        x: &GpuTensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::l2_norm(self, x, group, scale, eps).map_err(|e| e.into_backend("l2_norm"))
    }

    fn add(&self, x: &mut GpuTensor, y: &GpuTensor) -> Result<(), BackendError> {
        Wgpu::add(self, x, y).map_err(|e| e.into_backend("add"))
    }

    fn swiglu(&self, gate: &GpuTensor, up: &GpuTensor) -> Result<GpuTensor, BackendError> {
        Wgpu::swiglu(self, gate, up).map_err(|e| e.into_backend("swiglu"))
    }

    fn sigmoid_mul(&self, x: &GpuTensor, gate: &GpuTensor) -> Result<GpuTensor, BackendError> {
        Wgpu::sigmoid_mul(self, x, gate).map_err(|e| e.into_backend("sigmoid_mul"))
    }

    fn rope(
        &self,
        x: &GpuTensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::rope(self, x, head_dim, rot_dims, freq_base, pos0).map_err(|e| e.into_backend("rope"))
    }

    fn attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        cache: &mut KvCache<'_, GpuTensor>,
        shape: AttentionShape,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::attention(self, q, k, v, cache, shape).map_err(|e| e.into_backend("attention"))
    }

    fn gated_attention(
        &self,
        op: &GatedAttention<'_, GpuTensor>,
        cache: &mut KvCache<'_, GpuTensor>,
    ) -> Result<Option<GpuTensor>, BackendError> {
        Wgpu::gated_attention(self, op, cache)
            .map(Some)
            .map_err(|e| e.into_backend("gated_attention"))
    }

    fn conv1d_silu(
        &self,
        x: &GpuTensor,
        w: &GpuTensor,
        state: &mut GpuTensor,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::conv1d_silu(self, x, w, state).map_err(|e| e.into_backend("conv1d_silu"))
    }

    fn delta_net_gates(
        &self,
        alpha: &GpuTensor,
        beta: &GpuTensor,
        ssm_a: &GpuTensor,
        dt_bias: &GpuTensor,
    ) -> Result<(GpuTensor, GpuTensor), BackendError> {
        Wgpu::delta_net_gates(self, alpha, beta, ssm_a, dt_bias)
            .map_err(|e| e.into_backend("delta_net_gates"))
    }

    fn delta_rule(
        &self,
        op: &DeltaRule<'_, GpuTensor>,
        state: &mut GpuTensor,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::delta_rule(self, op, state).map_err(|e| e.into_backend("delta_rule"))
    }

    fn conv_qkv_norm(
        &self,
        op: &ConvQkvNorm<'_, GpuTensor>,
        state: &mut GpuTensor,
    ) -> Result<Option<Qkv<GpuTensor>>, BackendError> {
        Wgpu::conv_qkv_norm(self, op, state)
            .map(Some)
            .map_err(|e| e.into_backend("conv_qkv_norm"))
    }

    fn gated_delta_rule(
        &self,
        op: &GatedDeltaRule<'_, GpuTensor>,
        state: &mut GpuTensor,
    ) -> Result<Option<GpuTensor>, BackendError> {
        Wgpu::gated_delta_rule(self, op, state)
            .map(Some)
            .map_err(|e| e.into_backend("gated_delta_rule"))
    }

    fn gated_rms_norm(
        &self,
        x: &GpuTensor,
        z: &GpuTensor,
        w: &GpuTensor,
        eps: f32,
    ) -> Result<GpuTensor, BackendError> {
        Wgpu::gated_rms_norm(self, x, z, w, eps).map_err(|e| e.into_backend("gated_rms_norm"))
    }

    fn status(&self) -> Result<(), BackendError> {
        match self.check_device() {
            Err(GpuError::Device(first)) => Err(BackendError::Device(first)),
            other => other.map_err(|e| e.into_backend("device")),
        }
    }

    fn synchronize(&self) {
        if let Err(e) = self.recorder.flush() {
            self.poison(e);
        } else if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
            self.poison(GpuError::Readback(e.to_string()));
        }
    }

    /// Ops only record work, from any thread.
    fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        work()
    }

    fn set_profiling(&self, on: bool) {
        if let Err(e) = self.recorder.set_profiling(on) {
            self.poison(e);
        }
    }

    /// A failure to read the profile poisons the backend and yields no counters.
    fn take_stats(&self) -> BackendStats {
        self.recorder.take_stats().unwrap_or_else(|e| {
            self.poison(e);
            BackendStats::default()
        })
    }
}
