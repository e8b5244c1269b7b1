//! The op set the model is written against (`src/model/forward.rs`).
//!
//! A backend implements these ops and owns no model logic. Activations are opaque
//! [`Backend::Tensor`]s: f32 matrices of `rows` (tokens, heads, cache slots) × `cols`. On the CPU an
//! op computes at once; a GPU backend records a dispatch instead, and only [`Backend::read_rows`]
//! waits for the recorded work — nothing in the op set forces a readback mid-forward, and every
//! scalar (position, eps, sizes) is an op argument, never a tensor that would have to be read.

pub mod checks;
pub mod cpu;
pub mod gpu;
mod kind;
pub mod metal;

pub use kind::{BackendKind, BackendOptions, UnknownBackend};

use std::sync::Arc;

use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::QuantError;
use crate::sample::Draw;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{op}: {detail}")]
    Shape { op: &'static str, detail: String },
    #[error("{op}: weight {tensor}: {source}")]
    Quant {
        op: &'static str,
        tensor: String,
        #[source]
        source: QuantError,
    },
    #[error("embedding: token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange { token: u32, vocab: usize },
    /// The device failed: out of memory, lost, or a readback that did not complete.
    #[error("{0}")]
    Device(String),
}

/// Head geometry of gated full attention (§4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
}

impl AttentionShape {
    /// Columns of k, v and the cache: every kv head's values.
    pub fn kv_cols(self) -> usize {
        self.n_kv_head * self.head_dim
    }

    /// The factor of the scores q·k, 1/sqrt(head_dim).
    pub fn scale(self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// q, k and v of a Gated DeltaNet layer, as [`Backend::conv_qkv_norm`] leaves them.
pub struct Qkv<T> {
    pub q: T,
    pub k: T,
    pub v: T,
}

/// NeoX rotary embedding: the first `dims` of each head rotated, pair (i, i + dims/2) by
/// position · base^(−2i/dims).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeShape {
    pub dims: usize,
    pub base: f32,
}

/// Head geometry of the Gated DeltaNet recurrence (§5): value head h reads q/k head `h % n_k_head`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaNetShape {
    pub n_k_head: usize,
    pub n_v_head: usize,
    pub k_dim: usize,
    pub v_dim: usize,
}

/// A layer's KV cache as an op sees it: the new keys and values go to rows `pos0..`, and the
/// token of row t attends over rows `0..=pos0 + t`.
pub struct KvCache<'a, T> {
    pub k: &'a mut T,
    pub v: &'a mut T,
    pub pos0: usize,
}

/// One attention over a KV cache as the GPU kernels take it: [`Backend::attention`]'s operands,
/// the cache read (and written) through shared references, and, if `gate` is given, the output
/// times sigmoid of its gate halves (each head's 2·head_dim columns are [query | gate]).
pub struct AttentionCall<'a, T> {
    pub q: &'a T,
    pub k: &'a T,
    pub v: &'a T,
    pub k_cache: &'a T,
    pub v_cache: &'a T,
    pub pos0: usize,
    pub shape: AttentionShape,
    pub gate: Option<&'a T>,
}

impl<T> Clone for AttentionCall<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for AttentionCall<'_, T> {}

impl<'a, T> AttentionCall<'a, T> {
    /// Attention of q, k and v (the new rows) over `cache`, gated by `gate` if given.
    pub fn new(
        [q, k, v]: [&'a T; 3],
        cache: &'a KvCache<'_, T>,
        shape: AttentionShape,
        gate: Option<&'a T>,
    ) -> AttentionCall<'a, T> {
        AttentionCall {
            q,
            k,
            v,
            k_cache: cache.k,
            v_cache: cache.v,
            pos0: cache.pos0,
            shape,
            gate,
        }
    }
}

/// The operands of gated attention's steps 3–6 (§4), as the model runs them
/// (`model::forward::gated_attention_steps`): the projections, the per-head norms of q and k,
/// and the geometry.
pub struct GatedAttention<'a, T> {
    /// Each head's 2·head_dim projections, [query | gate].
    pub q_and_gate: &'a T,
    pub k: &'a T,
    pub v: &'a T,
    pub q_norm: &'a T,
    pub k_norm: &'a T,
    pub eps: f32,
    pub rope: RopeShape,
    pub shape: AttentionShape,
}

/// The operands of the Gated DeltaNet's conv and split (§5.2–5.3), as the model runs them
/// (`model::forward::conv_qkv_norm_steps`): the projection m, the conv taps `w` (one row per
/// channel, oldest first), q's extra scale and the L2 norm's eps.
pub struct ConvQkvNorm<'a, T> {
    pub m: &'a T,
    pub w: &'a T,
    pub shape: DeltaNetShape,
    pub q_scale: f32,
    pub eps: f32,
}

/// The operands of the gated delta rule (§5.4) with its gates computed: decay `g` and write
/// strength `beta`, one per row and value head.
pub struct DeltaRule<'a, T> {
    pub qkv: &'a Qkv<T>,
    pub g: &'a T,
    pub beta: &'a T,
    pub shape: DeltaNetShape,
}

/// Where a delta-rule kernel's decay and write strength come from (the GPU and MSL launch code).
pub(crate) enum DeltaRuleGates<'a, T> {
    /// g and β as [`Backend::delta_net_gates`] gives them.
    Computed { g: &'a T, beta: &'a T },
    /// The projections and the layer's per-head parameters, the gates computed in the kernel.
    Raw {
        alpha: &'a T,
        beta: &'a T,
        ssm_a: &'a T,
        dt_bias: &'a T,
    },
}

impl<'a, T> DeltaRuleGates<'a, T> {
    /// The kernel's operands: the two per-row gate inputs, the two per-head parameters (where
    /// the gates are computed already, any tensor: the kernel does not read them), and whether
    /// the gates are still to compute.
    pub(crate) fn operands(&self) -> ([&'a T; 2], [&'a T; 2], bool) {
        match *self {
            DeltaRuleGates::Computed { g, beta } => ([g, beta], [g, g], false),
            DeltaRuleGates::Raw {
                alpha,
                beta,
                ssm_a,
                dt_bias,
            } => ([alpha, beta], [ssm_a, dt_bias], true),
        }
    }
}

/// The operands of the gated delta rule with its gates still to compute (§5.4), as the model
/// runs it (`model::forward::gated_delta_rule_steps`).
pub struct GatedDeltaRule<'a, T> {
    pub qkv: &'a Qkv<T>,
    pub alpha: &'a T,
    pub beta: &'a T,
    pub ssm_a: &'a T,
    pub dt_bias: &'a T,
    pub shape: DeltaNetShape,
}

/// A copy of a tensor on its way to the host: [`Backend::start_read`] begins it and
/// [`PendingRead::wait`] ends it, so that a backend can keep working in between.
pub struct PendingRead(Box<dyn FnOnce() -> Vec<f32> + Send>);

impl PendingRead {
    /// A read that is already complete.
    pub fn ready(values: Vec<f32>) -> PendingRead {
        PendingRead(Box::new(move || values))
    }

    /// A read that `finish` completes.
    pub fn new(finish: impl FnOnce() -> Vec<f32> + Send + 'static) -> PendingRead {
        PendingRead(Box::new(finish))
    }

    /// Waits for the copy and returns the values (row-major).
    pub fn wait(self) -> Vec<f32> {
        (self.0)()
    }
}

/// The profile class of every matmul with the weight named `weight`, where it is not the one
/// the op and weight type give: `lm_head` for the output projection. GGUF names that
/// `output.weight`, or leaves it out and ties it to `token_embd.weight`, which then takes part
/// in no other matmul.
pub fn weight_profile_class(weight: &str) -> Option<&'static str> {
    matches!(weight, "output.weight" | "token_embd.weight").then_some("lm_head")
}

/// The outputs of [`Backend::rms_norm_matmuls`], one per weight by construction.
pub fn one_per_weight<T, const N: usize>(ys: Vec<T>) -> [T; N] {
    let count = ys.len();
    ys.try_into()
        .unwrap_or_else(|_| unreachable!("{count} outputs for {N} weights"))
}

/// Work counters and, when profiling is on, time per op class (for `qwen35 bench`).
#[derive(Clone, Debug, Default)]
pub struct BackendStats {
    /// Kernel dispatches recorded (GPU) or ops run (CPU).
    pub dispatches: u64,
    /// Command-buffer submissions (GPU); 0 on the CPU.
    pub submits: u64,
    /// Per op class, in first-seen order; empty unless profiling was on.
    pub ops: Vec<OpTiming>,
}

/// Time spent in one class of op (e.g. "matmul q4_K", "delta_rule", "attention").
#[derive(Clone, Debug, Default)]
pub struct OpTiming {
    pub class: String,
    pub calls: u64,
    pub seconds: f64,
    /// Bytes of weights and activations the calls read, as the backend counts them.
    pub bytes_read: u64,
}

pub trait Backend: Send + Sync {
    /// An f32 activation matrix on the backend.
    type Tensor: Send + Sync;
    /// A weight matrix in its file format, uploaded once.
    type Weight: Send + Sync;

    /// Uploads a GGUF tensor as a matrix of `dims[1..]` rows of `dims[0]` elements.
    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<Self::Weight, BackendError>;
    /// An f32 matrix of `rows × cols` from host values (row-major).
    fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<Self::Tensor, BackendError>;
    /// A zero matrix of `rows × cols`.
    fn zeros(&self, rows: usize, cols: usize) -> Self::Tensor;
    /// A zero KV cache of `rows` positions of `cols` values, for [`KvCache`]: stored as the
    /// backend chooses (a GPU in f16 if asked to), read and written through
    /// [`Backend::read_rows`] and [`Backend::write_rows`] as f32 like any tensor.
    fn kv_cache(&self, rows: usize, cols: usize) -> Self::Tensor;
    /// (rows, cols) of a tensor.
    fn dims(&self, x: &Self::Tensor) -> (usize, usize);
    /// Waits for pending work and copies rows `start..start+count` to the host (clamped to the tensor).
    fn read_rows(&self, x: &Self::Tensor, start: usize, count: usize) -> Vec<f32>;
    /// Overwrites rows `start..` of `x` with host values (whole rows).
    fn write_rows(
        &self,
        x: &mut Self::Tensor,
        start: usize,
        data: &[f32],
    ) -> Result<(), BackendError>;

    /// Like [`Backend::read_rows`] of every row, but returns at once; the backend goes on with
    /// later work while the copy is under way. A failed copy yields no values and leaves its
    /// error in [`Backend::status`].
    fn start_read(&self, x: &Self::Tensor) -> PendingRead;

    /// Row `tokens[t]` of `table`, dequantized, for each t.
    fn embed(&self, table: &Self::Weight, tokens: &[u32]) -> Result<Self::Tensor, BackendError>;
    /// [`Backend::embed`] of the token ids held in `ids` (one per row, as exact f32 values, as
    /// [`Backend::argmax`] gives them), without the ids visiting the host.
    fn embed_ids(
        &self,
        table: &Self::Weight,
        ids: &Self::Tensor,
    ) -> Result<Self::Tensor, BackendError> {
        let rows = self.dims(ids).0;
        let tokens: Vec<u32> = self
            .read_rows(ids, 0, rows)
            .iter()
            .map(|&id| id as u32)
            .collect();
        self.embed(table, &tokens)
    }
    /// Each row's index of its largest value (the lowest index on ties; NaN never wins), as an
    /// exact f32: a `rows × 1` tensor.
    fn argmax(&self, x: &Self::Tensor) -> Result<Self::Tensor, BackendError> {
        let (rows, cols) = self.dims(x);
        let values = self.read_rows(x, 0, rows);
        let best: Vec<f32> = values
            .chunks_exact(cols.max(1))
            .map(|row| crate::sample::argmax(row) as f32)
            .collect();
        self.upload(rows, 1, &best)
    }
    /// The next token from `logits` (one row, which the op may change) as
    /// [`crate::sample::Sampler::sample`] chooses it: the repeat penalty on the ids in `recent`
    /// (a column of exact f32 ids, negative where empty), then `draw`. The id is also written to
    /// row `slot` of `recent`, and returned as a 1×1 tensor that stays on the backend, as
    /// [`Backend::argmax`]'s does.
    fn sample(
        &self,
        logits: &mut Self::Tensor,
        recent: &mut Self::Tensor,
        slot: usize,
        draw: &Draw,
    ) -> Result<Self::Tensor, BackendError>;
    /// `y = x · Wᵀ` for every row of x.
    fn matmul(&self, x: &Self::Tensor, w: &Self::Weight) -> Result<Self::Tensor, BackendError>;
    /// `rms_norm(x, norm, eps) · Wᵀ`: a projection of the normed residual stream.
    fn rms_norm_matmul(
        &self,
        x: &Self::Tensor,
        norm: &Self::Tensor,
        eps: f32,
        w: &Self::Weight,
    ) -> Result<Self::Tensor, BackendError> {
        self.matmul(&self.rms_norm(x, norm, eps)?, w)
    }
    /// [`Backend::rms_norm_matmul`] through each weight: the projections of one normed input, which
    /// a backend may run together ([`rms_norm_matmul_each`] where it does not).
    fn rms_norm_matmuls<const N: usize>(
        &self,
        x: &Self::Tensor,
        norm: &Self::Tensor,
        eps: f32,
        ws: [&Self::Weight; N],
    ) -> Result<[Self::Tensor; N], BackendError>;
    /// `acc += x · Wᵀ`: a projection added to the residual stream.
    fn matmul_add(
        &self,
        x: &Self::Tensor,
        w: &Self::Weight,
        acc: &mut Self::Tensor,
    ) -> Result<(), BackendError> {
        let y = self.matmul(x, w)?;
        self.add(acc, &y)
    }
    /// `acc += (silu(gate) ⊙ up) · Wᵀ`: the SwiGLU MLP's down projection, added to the residual.
    fn swiglu_matmul_add(
        &self,
        gate: &Self::Tensor,
        up: &Self::Tensor,
        w: &Self::Weight,
        acc: &mut Self::Tensor,
    ) -> Result<(), BackendError> {
        let x = self.swiglu(gate, up)?;
        self.matmul_add(&x, w, acc)
    }
    /// Rows `start..start+count` of x.
    fn rows(
        &self,
        x: &Self::Tensor,
        start: usize,
        count: usize,
    ) -> Result<Self::Tensor, BackendError>;
    /// In each group of `group` columns, the columns `offset..offset+width`, concatenated.
    fn slice_cols(
        &self,
        x: &Self::Tensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<Self::Tensor, BackendError>;
    /// Each contiguous group of `w.len()` columns: `x / sqrt(mean(x²) + eps) ⊙ w` (w: one row).
    fn rms_norm(
        &self,
        x: &Self::Tensor,
        w: &Self::Tensor,
        eps: f32,
    ) -> Result<Self::Tensor, BackendError>;
    /// Each group of `group` columns: `x · scale / sqrt(Σx² + eps)`.
    fn l2_norm(
        &self,
        x: &Self::Tensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<Self::Tensor, BackendError>;
    /// `x += y`.
    fn add(&self, x: &mut Self::Tensor, y: &Self::Tensor) -> Result<(), BackendError>;
    /// `silu(gate) ⊙ up`.
    fn swiglu(&self, gate: &Self::Tensor, up: &Self::Tensor) -> Result<Self::Tensor, BackendError>;
    /// `x ⊙ sigmoid(gate)`.
    fn sigmoid_mul(
        &self,
        x: &Self::Tensor,
        gate: &Self::Tensor,
    ) -> Result<Self::Tensor, BackendError>;
    /// NeoX RoPE on the first `rot_dims` of every `head_dim` group, row t at position `pos0 + t`.
    fn rope(
        &self,
        x: &Self::Tensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<Self::Tensor, BackendError>;
    /// Writes k, v into the cache, then causal GQA softmax attention of q over the cache rows
    /// each token sees (see [`KvCache`]), scale 1/sqrt(head_dim); q head h reads kv head
    /// `h / (n_head / n_kv_head)`.
    fn attention(
        &self,
        q: &Self::Tensor,
        k: &Self::Tensor,
        v: &Self::Tensor,
        cache: &mut KvCache<'_, Self::Tensor>,
        shape: AttentionShape,
    ) -> Result<Self::Tensor, BackendError>;
    /// §4 steps 3–6 in fewer dispatches than the model's op-by-op steps, where the backend has
    /// the kernels for them: the same results, and `None` (nothing run) where it has not.
    fn gated_attention(
        &self,
        op: &GatedAttention<'_, Self::Tensor>,
        cache: &mut KvCache<'_, Self::Tensor>,
    ) -> Result<Option<Self::Tensor>, BackendError>;
    /// Causal depthwise conv (`w`: one row of taps per channel, oldest first) over the raw inputs
    /// in `state` (the previous taps−1 rows) followed by x, then SiLU; `state` keeps the last rows.
    fn conv1d_silu(
        &self,
        x: &Self::Tensor,
        w: &Self::Tensor,
        state: &mut Self::Tensor,
    ) -> Result<Self::Tensor, BackendError>;
    /// `(g, β) = (ssm_a · softplus(alpha + dt_bias), sigmoid(beta))`, elementwise per head.
    fn delta_net_gates(
        &self,
        alpha: &Self::Tensor,
        beta: &Self::Tensor,
        ssm_a: &Self::Tensor,
        dt_bias: &Self::Tensor,
    ) -> Result<(Self::Tensor, Self::Tensor), BackendError>;
    /// The gated delta rule (QWEN35.md §5.4) token by token over the rows, per value head, on the
    /// f32 `state` (one row of k_dim × v_dim per value head, key index major); returns o.
    fn delta_rule(
        &self,
        op: &DeltaRule<'_, Self::Tensor>,
        state: &mut Self::Tensor,
    ) -> Result<Self::Tensor, BackendError>;
    /// §5.2–5.3 in fewer dispatches than the model's op-by-op steps, where the backend has the
    /// kernel: the same results, and `None` (nothing run, `state` untouched) where it has not.
    fn conv_qkv_norm(
        &self,
        op: &ConvQkvNorm<'_, Self::Tensor>,
        state: &mut Self::Tensor,
    ) -> Result<Option<Qkv<Self::Tensor>>, BackendError>;
    /// §5.4 with its gates computed in the same dispatch as the rule, where the backend has the
    /// kernel: the same results, and `None` (nothing run, `state` untouched) where it has not.
    fn gated_delta_rule(
        &self,
        op: &GatedDeltaRule<'_, Self::Tensor>,
        state: &mut Self::Tensor,
    ) -> Result<Option<Self::Tensor>, BackendError>;
    /// Each group of `w.len()` columns: `x / sqrt(mean(x²) + eps) ⊙ w ⊙ silu(z)`.
    fn gated_rms_norm(
        &self,
        x: &Self::Tensor,
        z: &Self::Tensor,
        w: &Self::Tensor,
        eps: f32,
    ) -> Result<Self::Tensor, BackendError>;

    // The glue below has no defaults: a backend that wraps another (or a device) must say what
    // each one does, so none can silently report a lost device as healthy or block a read.

    /// The failure that stopped the backend, if any. Ops that cannot return one (`zeros`,
    /// `read_rows`, [`PendingRead::wait`]) leave it here: a device that ran out of memory or was
    /// lost, a readback that failed.
    fn status(&self) -> Result<(), BackendError>;

    /// Waits until the work recorded so far and the writes made so far have run (a GPU backend
    /// records ops and runs them at a readback; the CPU has nothing to wait for); the profile
    /// calls it to time a readback apart from the work before it.
    fn synchronize(&self);

    /// Runs `work`, a whole forward of ops, where this backend starts ops most cheaply. The CPU
    /// runs it on one of its worker threads: an op's parallel loop started from any other
    /// thread hands the loop to the pool and sleeps until it is done, and on a virtual machine
    /// each such wake-up costs tens of microseconds, hundreds of times a token.
    fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R;

    /// Turns per-op-class timing on or off (off costs nothing).
    fn set_profiling(&self, on: bool);
    /// The counters since the last call, which resets them.
    fn take_stats(&self) -> BackendStats;
}

/// [`Backend::sample`] on the host: the logits and `recent` read back, the token chosen by
/// [`crate::sample::choose`], and its id written to `recent` and uploaded.
pub fn sample_on_host<B: Backend + ?Sized>(
    backend: &B,
    logits: &B::Tensor,
    recent: &mut B::Tensor,
    slot: usize,
    draw: &Draw,
) -> Result<B::Tensor, BackendError> {
    let (rows, cols) = backend.dims(logits);
    let window = backend.dims(recent);
    if rows != 1 || window.1 != 1 || slot >= window.0 {
        return Err(BackendError::Shape {
            op: "sample",
            detail: format!(
                "logits {rows}×{cols}, recent ids {}×{} at row {slot}",
                window.0, window.1
            ),
        });
    }
    let mut values = backend.read_rows(logits, 0, 1);
    let recent_ids: Vec<u32> = backend
        .read_rows(recent, 0, window.0)
        .iter()
        .filter(|&&id| id >= 0.0)
        .map(|&id| id as u32)
        .collect();
    backend.status()?;
    crate::sample::apply_repeat_penalty(&mut values, &recent_ids, draw.repeat_penalty);
    let id = crate::sample::choose(&values, draw) as f32;
    backend.write_rows(recent, slot, &[id])?;
    backend.upload(1, 1, &[id])
}

/// [`Backend::rms_norm_matmuls`] as one [`Backend::rms_norm_matmul`] per weight.
pub fn rms_norm_matmul_each<B: Backend + ?Sized, const N: usize>(
    backend: &B,
    x: &B::Tensor,
    norm: &B::Tensor,
    eps: f32,
    ws: [&B::Weight; N],
) -> Result<[B::Tensor; N], BackendError> {
    let mut ys = Vec::with_capacity(N);
    for w in ws {
        ys.push(backend.rms_norm_matmul(x, norm, eps, w)?);
    }
    Ok(one_per_weight(ys))
}
