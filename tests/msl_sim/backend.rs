//! The Metal backend's decode ops as a whole [`Backend`] on the MSL simulator: every op goes
//! through qwen35's Metal op code (qwen35::backend::metal::ops) to the simulated kernels, with
//! no fallback, so a forward of one token runs nothing but MSL. Activations of more than one
//! row (prefill) are the WGSL kernels' on Metal and are refused here: feed tokens one at a time.

use std::sync::Arc;

use qwen35::backend::metal::ops;
use qwen35::backend::{
    AttentionShape, Backend, BackendError, BackendStats, DeltaNetShape, Qkv, RopeShape,
};
use qwen35::gguf::{GgufFile, TensorInfo};

use super::device::{SimDevice, SimTensor, SimWeight};
use super::{DeviceBuffer, Order};

pub struct SimMetal {
    pub device: SimDevice,
    /// Weight rows per buffer: small values split weights as a GPU splits those past its
    /// binding limit.
    max_part_rows: usize,
}

impl SimMetal {
    pub fn new(order: Order, max_part_rows: usize) -> SimMetal {
        SimMetal {
            device: SimDevice::new(order),
            max_part_rows,
        }
    }
}

fn decode_only(op: &'static str, rows: usize) -> Result<(), BackendError> {
    if rows == 1 {
        Ok(())
    } else {
        Err(BackendError::Shape {
            op,
            detail: format!("{rows} rows: the simulated Metal backend runs decode ops only"),
        })
    }
}

impl Backend for SimMetal {
    type Tensor = SimTensor;
    type Weight = SimWeight;

    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<SimWeight, BackendError> {
        let cols = info.dims.first().copied().unwrap_or(0) as usize;
        let rows = info.dims.iter().skip(1).product::<u64>() as usize;
        Ok(self.device.weight(
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
        Ok(self.device.tensor(rows, cols, data))
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
        let start = start.min(x.rows);
        let end = start.saturating_add(count).min(x.rows);
        x.values()[start * x.cols..end * x.cols].to_vec()
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

    fn embed(&self, table: &SimWeight, tokens: &[u32]) -> Result<SimTensor, BackendError> {
        decode_only("embed", tokens.len())?;
        ops::embed(&self.device, table, tokens)
    }

    fn embed_ids(&self, table: &SimWeight, ids: &SimTensor) -> Result<SimTensor, BackendError> {
        decode_only("embed_ids", ids.rows)?;
        ops::embed_ids(&self.device, table, ids)
    }

    fn argmax(&self, x: &SimTensor) -> Result<SimTensor, BackendError> {
        decode_only("argmax", x.rows)?;
        ops::argmax(&self.device, x)
    }

    fn matmul(&self, x: &SimTensor, w: &SimWeight) -> Result<SimTensor, BackendError> {
        decode_only("matmul", x.rows)?;
        ops::matmul(&self.device, x, w)
    }

    fn rms_norm_matmul(
        &self,
        x: &SimTensor,
        norm: &SimTensor,
        eps: f32,
        w: &SimWeight,
    ) -> Result<SimTensor, BackendError> {
        decode_only("rms_norm_matmul", x.rows)?;
        ops::rms_norm_matmul(&self.device, x, norm, eps, w)
    }

    fn matmul_add(
        &self,
        x: &SimTensor,
        w: &SimWeight,
        acc: &mut SimTensor,
    ) -> Result<(), BackendError> {
        decode_only("matmul_add", x.rows)?;
        ops::matmul_add(&self.device, x, w, acc)
    }

    fn swiglu_matmul_add(
        &self,
        gate: &SimTensor,
        up: &SimTensor,
        w: &SimWeight,
        acc: &mut SimTensor,
    ) -> Result<(), BackendError> {
        decode_only("swiglu_matmul_add", gate.rows)?;
        ops::swiglu_matmul_add(&self.device, gate, up, w, acc)
    }

    fn rows(&self, x: &SimTensor, start: usize, count: usize) -> Result<SimTensor, BackendError> {
        decode_only("rows", count)?;
        ops::rows(&self.device, x, start, count)
    }

    fn slice_cols(
        &self,
        x: &SimTensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<SimTensor, BackendError> {
        decode_only("slice_cols", x.rows)?;
        ops::slice_cols(&self.device, x, group, offset, width)
    }

    fn rms_norm(&self, x: &SimTensor, w: &SimTensor, eps: f32) -> Result<SimTensor, BackendError> {
        decode_only("rms_norm", x.rows)?;
        ops::rms_norm(&self.device, x, w, eps)
    }

    fn l2_norm(
        &self,
        x: &SimTensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<SimTensor, BackendError> {
        decode_only("l2_norm", x.rows)?;
        ops::l2_norm(&self.device, x, group, scale, eps)
    }

    fn add(&self, x: &mut SimTensor, y: &SimTensor) -> Result<(), BackendError> {
        decode_only("add", x.rows)?;
        ops::add(&self.device, x, y)
    }

    fn swiglu(&self, gate: &SimTensor, up: &SimTensor) -> Result<SimTensor, BackendError> {
        decode_only("swiglu", gate.rows)?;
        ops::swiglu(&self.device, gate, up)
    }

    fn sigmoid_mul(&self, x: &SimTensor, gate: &SimTensor) -> Result<SimTensor, BackendError> {
        decode_only("sigmoid_mul", x.rows)?;
        ops::sigmoid_mul(&self.device, x, gate)
    }

    fn rope(
        &self,
        x: &SimTensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<SimTensor, BackendError> {
        decode_only("rope", x.rows)?;
        ops::rope(&self.device, x, head_dim, rot_dims, freq_base, pos0)
    }

    fn attention(
        &self,
        q: &SimTensor,
        k: &SimTensor,
        v: &SimTensor,
        k_cache: &mut SimTensor,
        v_cache: &mut SimTensor,
        pos0: usize,
        shape: AttentionShape,
    ) -> Result<SimTensor, BackendError> {
        decode_only("attention", q.rows)?;
        ops::attention(&self.device, q, k, v, k_cache, v_cache, pos0, shape)
    }

    fn gated_attention(
        &self,
        q_and_gate: &SimTensor,
        k: &SimTensor,
        v: &SimTensor,
        q_norm: &SimTensor,
        k_norm: &SimTensor,
        eps: f32,
        rope: RopeShape,
        k_cache: &mut SimTensor,
        v_cache: &mut SimTensor,
        pos0: usize,
        shape: AttentionShape,
    ) -> Result<SimTensor, BackendError> {
        decode_only("gated_attention", q_and_gate.rows)?;
        ops::gated_attention(
            &self.device,
            q_and_gate,
            k,
            v,
            q_norm,
            k_norm,
            eps,
            rope,
            k_cache,
            v_cache,
            pos0,
            shape,
        )
    }

    fn conv1d_silu(
        &self,
        x: &SimTensor,
        w: &SimTensor,
        state: &mut SimTensor,
    ) -> Result<SimTensor, BackendError> {
        decode_only("conv1d_silu", x.rows)?;
        ops::conv1d_silu(&self.device, x, w, state)
    }

    fn delta_net_gates(
        &self,
        alpha: &SimTensor,
        beta: &SimTensor,
        ssm_a: &SimTensor,
        dt_bias: &SimTensor,
    ) -> Result<(SimTensor, SimTensor), BackendError> {
        decode_only("delta_net_gates", alpha.rows)?;
        ops::delta_net_gates(&self.device, alpha, beta, ssm_a, dt_bias)
    }

    fn delta_rule(
        &self,
        q: &SimTensor,
        k: &SimTensor,
        v: &SimTensor,
        g: &SimTensor,
        beta: &SimTensor,
        state: &mut SimTensor,
        shape: DeltaNetShape,
    ) -> Result<SimTensor, BackendError> {
        decode_only("delta_rule", q.rows)?;
        ops::delta_rule(&self.device, q, k, v, g, beta, state, shape)
    }

    fn conv_qkv_norm(
        &self,
        m: &SimTensor,
        w: &SimTensor,
        state: &mut SimTensor,
        shape: DeltaNetShape,
        q_scale: f32,
        eps: f32,
    ) -> Result<Qkv<SimTensor>, BackendError> {
        decode_only("conv_qkv_norm", m.rows)?;
        ops::conv_qkv_norm(&self.device, m, w, state, shape, q_scale, eps)
    }

    fn gated_delta_rule(
        &self,
        q: &SimTensor,
        k: &SimTensor,
        v: &SimTensor,
        alpha: &SimTensor,
        beta: &SimTensor,
        ssm_a: &SimTensor,
        dt_bias: &SimTensor,
        state: &mut SimTensor,
        shape: DeltaNetShape,
    ) -> Result<SimTensor, BackendError> {
        decode_only("gated_delta_rule", q.rows)?;
        ops::gated_delta_rule(
            &self.device,
            q,
            k,
            v,
            alpha,
            beta,
            ssm_a,
            dt_bias,
            state,
            shape,
        )
    }

    fn gated_rms_norm(
        &self,
        x: &SimTensor,
        z: &SimTensor,
        w: &SimTensor,
        eps: f32,
    ) -> Result<SimTensor, BackendError> {
        decode_only("gated_rms_norm", x.rows)?;
        ops::gated_rms_norm(&self.device, x, z, w, eps)
    }

    /// Dispatches since the last call (the simulator has no submits).
    fn take_stats(&self) -> BackendStats {
        BackendStats {
            dispatches: self.device.take_dispatches(),
            ..BackendStats::default()
        }
    }
}
