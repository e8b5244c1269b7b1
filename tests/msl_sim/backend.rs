//! The Metal backend on the MSL simulator: qwen35's own [`Metal`] glue (which op goes to an MSL
//! kernel, reads, the device's status) over a [`SimDevice`], whose memory is [`SimMemory`].
//! Every op with an MSL kernel runs through qwen35's Metal op code to the simulated kernels, so a
//! forward of one token runs nothing but MSL. Activations of more than one row (prefill) are the
//! WGSL kernels' on Metal and are refused here: feed tokens one at a time.
//!
//! Faults can be planted ([`SimMemory::lose_device`], [`SimMemory::fail_readbacks`]) to see that
//! the glue reports them as the typed errors a real device's would be.

use std::sync::{Arc, Mutex};

use qwen35::backend::metal::Metal;
use qwen35::backend::{
    rms_norm_matmul_each, sample_on_host, AttentionShape, Backend, BackendError, BackendStats,
    ConvQkvNorm, DeltaRule, GatedAttention, GatedDeltaRule, KvCache, PendingRead, Qkv,
};
use qwen35::gguf::{GgufFile, TensorInfo};
use qwen35::sample::Draw;

use super::device::{SimDevice, SimTensor, SimWeight};
use super::{DeviceBuffer, Order};

pub type SimMetal = Metal<SimDevice>;

/// The Metal backend on a simulated device whose weights are split into parts of at most
/// `max_part_rows` rows (small values split them as a GPU splits those past its binding limit).
pub fn sim_metal(order: Order, max_part_rows: usize) -> SimMetal {
    Metal::on(SimDevice::with_weight_parts(order, max_part_rows))
}

/// A planted fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Every dispatch and read fails, as after a lost device.
    DeviceLost,
    /// Dispatches run, reads fail.
    Readback,
}

/// The simulated device's memory: host buffers, and the first failure, which every later read
/// and [`Backend::status`] report. Ops without an MSL kernel are refused.
pub struct SimMemory {
    max_part_rows: usize,
    fault: Mutex<Option<Fault>>,
    failure: Arc<Mutex<Option<String>>>,
    pub(crate) dispatches: Mutex<u64>,
}

impl SimMemory {
    pub fn new(max_part_rows: usize) -> SimMemory {
        SimMemory {
            max_part_rows,
            fault: Mutex::new(None),
            failure: Arc::default(),
            dispatches: Mutex::new(0),
        }
    }

    /// From now on the device is lost: dispatches and reads fail.
    pub fn lose_device(&self) {
        *self.fault.lock().unwrap() = Some(Fault::DeviceLost);
    }

    /// From now on every read fails (the kernels still run).
    pub fn fail_readbacks(&self) {
        *self.fault.lock().unwrap() = Some(Fault::Readback);
    }

    fn fail(&self, message: String) {
        self.failure.lock().unwrap().get_or_insert(message);
    }

    /// Fails a dispatch on a lost device, as wgpu's does.
    pub fn check_dispatch(&self) -> Result<(), BackendError> {
        if *self.fault.lock().unwrap() == Some(Fault::DeviceLost) {
            self.fail("the GPU device was lost (simulated)".into());
        }
        self.status()
    }

    /// The values of a read, or none (and the failure recorded) under a fault.
    fn read(&self, x: &SimTensor, start: usize, count: usize) -> Vec<f32> {
        match *self.fault.lock().unwrap() {
            Some(Fault::DeviceLost) => {
                self.fail("the GPU device was lost (simulated)".into());
                return Vec::new();
            }
            Some(Fault::Readback) => {
                self.fail("a readback failed (simulated)".into());
                return Vec::new();
            }
            None => {}
        }
        let start = start.min(x.rows);
        let end = start.saturating_add(count).min(x.rows);
        x.values()[start * x.cols..end * x.cols].to_vec()
    }
}

fn refused(op: &'static str, rows: usize) -> BackendError {
    BackendError::Shape {
        op,
        detail: format!("{rows} rows: the simulated Metal backend runs the MSL (decode) ops only"),
    }
}

impl Backend for SimMemory {
    type Tensor = SimTensor;
    type Weight = SimWeight;

    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<SimWeight, BackendError> {
        let cols = info.dims.first().copied().unwrap_or(0) as usize;
        let rows = info.dims.iter().skip(1).product::<u64>() as usize;
        Ok(SimWeight::new(
            &info.name,
            info.ggml_type,
            rows,
            cols,
            file.tensor_data(info),
            self.max_part_rows,
        ))
    }

    fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<SimTensor, BackendError> {
        if rows * cols != data.len() {
            return Err(BackendError::Shape {
                op: "upload",
                detail: format!("{rows}×{cols} from {} values", data.len()),
            });
        }
        Ok(SimTensor {
            rows,
            cols,
            buffer: DeviceBuffer::from_f32(data),
        })
    }

    fn zeros(&self, rows: usize, cols: usize) -> SimTensor {
        SimTensor {
            rows,
            cols,
            buffer: DeviceBuffer::zeroed(rows * cols * 4),
        }
    }

    fn dims(&self, x: &SimTensor) -> (usize, usize) {
        (x.rows, x.cols)
    }

    fn read_rows(&self, x: &SimTensor, start: usize, count: usize) -> Vec<f32> {
        self.read(x, start, count)
    }

    fn start_read(&self, x: &SimTensor) -> PendingRead {
        PendingRead::ready(self.read(x, 0, x.rows))
    }

    fn write_rows(
        &self,
        x: &mut SimTensor,
        start: usize,
        data: &[f32],
    ) -> Result<(), BackendError> {
        let from = start.saturating_mul(x.cols);
        if x.cols == 0 || !data.len().is_multiple_of(x.cols) || from + data.len() > x.rows * x.cols
        {
            return Err(BackendError::Shape {
                op: "write_rows",
                detail: format!(
                    "{} values at row {start} of {}×{}",
                    data.len(),
                    x.rows,
                    x.cols
                ),
            });
        }
        x.buffer.write_f32(from, data);
        Ok(())
    }

    fn embed(&self, _: &SimWeight, tokens: &[u32]) -> Result<SimTensor, BackendError> {
        Err(refused("embed", tokens.len()))
    }

    fn embed_ids(&self, _: &SimWeight, ids: &SimTensor) -> Result<SimTensor, BackendError> {
        Err(refused("embed_ids", ids.rows))
    }

    fn argmax(&self, x: &SimTensor) -> Result<SimTensor, BackendError> {
        Err(refused("argmax", x.rows))
    }

    fn sample(
        &self,
        logits: &mut SimTensor,
        recent: &mut SimTensor,
        slot: usize,
        draw: &Draw,
    ) -> Result<SimTensor, BackendError> {
        sample_on_host(self, logits, recent, slot, draw)
    }

    fn matmul(&self, x: &SimTensor, _: &SimWeight) -> Result<SimTensor, BackendError> {
        Err(refused("matmul", x.rows))
    }

    fn rms_norm_matmul(
        &self,
        x: &SimTensor,
        _: &SimTensor,
        _: f32,
        _: &SimWeight,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("rms_norm_matmul", x.rows))
    }

    fn rms_norm_matmuls<const N: usize>(
        &self,
        x: &SimTensor,
        norm: &SimTensor,
        eps: f32,
        ws: [&SimWeight; N],
    ) -> Result<[SimTensor; N], BackendError> {
        rms_norm_matmul_each(self, x, norm, eps, ws)
    }

    fn matmul_add(
        &self,
        x: &SimTensor,
        _: &SimWeight,
        _: &mut SimTensor,
    ) -> Result<(), BackendError> {
        Err(refused("matmul_add", x.rows))
    }

    fn swiglu_matmul_add(
        &self,
        gate: &SimTensor,
        _: &SimTensor,
        _: &SimWeight,
        _: &mut SimTensor,
    ) -> Result<(), BackendError> {
        Err(refused("swiglu_matmul_add", gate.rows))
    }

    fn rows(&self, _: &SimTensor, _: usize, count: usize) -> Result<SimTensor, BackendError> {
        Err(refused("rows", count))
    }

    fn slice_cols(
        &self,
        x: &SimTensor,
        _: usize,
        _: usize,
        _: usize,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("slice_cols", x.rows))
    }

    fn rms_norm(&self, x: &SimTensor, _: &SimTensor, _: f32) -> Result<SimTensor, BackendError> {
        Err(refused("rms_norm", x.rows))
    }

    fn l2_norm(&self, x: &SimTensor, _: usize, _: f32, _: f32) -> Result<SimTensor, BackendError> {
        Err(refused("l2_norm", x.rows))
    }

    fn add(&self, x: &mut SimTensor, _: &SimTensor) -> Result<(), BackendError> {
        Err(refused("add", x.rows))
    }

    fn swiglu(&self, gate: &SimTensor, _: &SimTensor) -> Result<SimTensor, BackendError> {
        Err(refused("swiglu", gate.rows))
    }

    fn sigmoid_mul(&self, x: &SimTensor, _: &SimTensor) -> Result<SimTensor, BackendError> {
        Err(refused("sigmoid_mul", x.rows))
    }

    fn rope(
        &self,
        x: &SimTensor,
        _: usize,
        _: usize,
        _: f32,
        _: usize,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("rope", x.rows))
    }

    fn attention(
        &self,
        q: &SimTensor,
        _: &SimTensor,
        _: &SimTensor,
        _: &mut KvCache<'_, SimTensor>,
        _: AttentionShape,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("attention", q.rows))
    }

    fn gated_attention(
        &self,
        op: &GatedAttention<'_, SimTensor>,
        _: &mut KvCache<'_, SimTensor>,
    ) -> Result<Option<SimTensor>, BackendError> {
        Err(refused("gated_attention", op.q_and_gate.rows))
    }

    fn conv1d_silu(
        &self,
        x: &SimTensor,
        _: &SimTensor,
        _: &mut SimTensor,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("conv1d_silu", x.rows))
    }

    fn delta_net_gates(
        &self,
        alpha: &SimTensor,
        _: &SimTensor,
        _: &SimTensor,
        _: &SimTensor,
    ) -> Result<(SimTensor, SimTensor), BackendError> {
        Err(refused("delta_net_gates", alpha.rows))
    }

    fn delta_rule(
        &self,
        op: &DeltaRule<'_, SimTensor>,
        _: &mut SimTensor,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("delta_rule", op.qkv.q.rows))
    }

    fn conv_qkv_norm(
        &self,
        op: &ConvQkvNorm<'_, SimTensor>,
        _: &mut SimTensor,
    ) -> Result<Option<Qkv<SimTensor>>, BackendError> {
        Err(refused("conv_qkv_norm", op.m.rows))
    }

    fn gated_delta_rule(
        &self,
        op: &GatedDeltaRule<'_, SimTensor>,
        _: &mut SimTensor,
    ) -> Result<Option<SimTensor>, BackendError> {
        Err(refused("gated_delta_rule", op.qkv.q.rows))
    }

    fn gated_rms_norm(
        &self,
        x: &SimTensor,
        _: &SimTensor,
        _: &SimTensor,
        _: f32,
    ) -> Result<SimTensor, BackendError> {
        Err(refused("gated_rms_norm", x.rows))
    }

    fn status(&self) -> Result<(), BackendError> {
        match self.failure.lock().unwrap().as_ref() {
            Some(message) => Err(BackendError::Device(message.clone())),
            None => Ok(()),
        }
    }

    /// The simulator runs each dispatch at once.
    fn synchronize(&self) {}

    fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        work()
    }

    fn set_profiling(&self, _: bool) {}

    /// Dispatches since the last call (the simulator has no submits).
    fn take_stats(&self) -> BackendStats {
        BackendStats {
            dispatches: std::mem::take(&mut *self.dispatches.lock().unwrap()),
            ..BackendStats::default()
        }
    }
}
