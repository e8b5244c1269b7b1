//! THE forward pass of qwen35, written once against the backend op set. Read it next to
//! QWEN35.md §2–§6: one step per line, in the order the model computes them.

use super::config::Config;
use super::state::{LayerState, State};
use super::weights::{Attention, DeltaNet, Mixer, Weights};
use super::ModelError;
use crate::backend::{
    AttentionShape, Backend, BackendError, ConvQkvNorm, DeltaNetShape, DeltaRule, GatedAttention,
    GatedDeltaRule, KvCache, Qkv, RopeShape,
};

/// The tokens a forward consumes: ids from the host, or ids already on the backend (one per row,
/// exact f32 values, as `Backend::argmax` leaves them).
#[derive(Clone, Copy)]
pub enum Tokens<'a, T> {
    Host(&'a [u32]),
    OnBackend(&'a T),
}

/// Runs `tokens` (at positions `state.position..`) through the model, advancing the state.
/// Returns the logits of every token ([n, vocab]) or of the last one ([1, vocab]).
pub fn forward<B: Backend>(
    b: &B,
    cfg: &Config,
    w: &Weights<B>,
    state: &mut State<B>,
    tokens: Tokens<'_, B::Tensor>,
    all_logits: bool,
) -> Result<B::Tensor, ModelError> {
    let pos0 = state.position;
    let eps = cfg.rms_eps;

    // §2: h = E[token], no scaling.
    let mut h = match tokens {
        Tokens::Host(ids) => b.embed(&w.token_embd, ids)?,
        Tokens::OnBackend(ids) => b.embed_ids(&w.token_embd, ids)?,
    };
    let n = b.dims(&h).0;
    for (i, (layer, layer_state)) in w.layers.iter().zip(&mut state.layers).enumerate() {
        // Token mixing on the normed stream u = rms_norm(h) ⊙ attn_norm, its output projection
        // added back to the residual.
        let u = Normed {
            x: &h,
            weight: &layer.attn_norm,
            eps,
        };
        let (o, output) = match (&layer.mixer, layer_state) {
            (mixer, _) if layer.skip_mixing => unmixed(b, cfg, mixer, u)?,
            (Mixer::Attention(a), LayerState::Attention { k, v }) => {
                (attention(b, cfg, a, u, k, v, pos0)?, &a.output)
            }
            (Mixer::DeltaNet(d), LayerState::DeltaNet { conv, recurrent }) => {
                (delta_net(b, cfg, d, u, conv, recurrent)?, &d.out)
            }
            _ => return Err(ModelError::StateMismatch { layer: i }),
        };
        b.matmul_add(&o, output, &mut h)?;

        // §6 SwiGLU MLP on the normed stream, added back: h += W_down · (silu(W_gate·u) ⊙ W_up·u).
        let u = Normed {
            x: &h,
            weight: &layer.post_attention_norm,
            eps,
        };
        let [gate, up] = u.project(b, [&layer.ffn_gate, &layer.ffn_up])?;
        b.swiglu_matmul_add(&gate, &up, &layer.ffn_down, &mut h)?;
    }
    state.position = pos0 + n;

    // Final norm and lm_head, only on the rows whose logits are wanted.
    let h = if all_logits {
        h
    } else {
        b.rows(&h, n.saturating_sub(1), 1)?
    };
    Ok(b.rms_norm_matmul(&h, &w.output_norm, eps, &w.output)?)
}

/// The residual stream through an RMS norm, as the projections read it: each projection is
/// `rms_norm(x) ⊙ weight · Wᵀ`, the projections of one input in one op, so that a backend can
/// norm once and run them together.
#[derive(Clone, Copy)]
struct Normed<'a, T> {
    x: &'a T,
    weight: &'a T,
    eps: f32,
}

impl<T> Normed<'_, T> {
    fn project<B: Backend<Tensor = T>, const N: usize>(
        &self,
        b: &B,
        ws: [&B::Weight; N],
    ) -> Result<[T; N], ModelError> {
        Ok(b.rms_norm_matmuls(self.x, self.weight, self.eps, ws)?)
    }
}

/// `qwen35 bench --skip`: the mixer's input projections and its output projection's operand
/// without the token mixing between them, to time what the mixing costs. The stand-in for the
/// mixing's output is z (delta net) or each attention head's query half; the logits are wrong.
fn unmixed<'w, B: Backend>(
    b: &B,
    cfg: &Config,
    mixer: &'w Mixer<B>,
    u: Normed<'_, B::Tensor>,
) -> Result<(B::Tensor, &'w B::Weight), ModelError> {
    Ok(match mixer {
        Mixer::Attention(a) => {
            let [q_and_gate, _, _] = u.project(b, [&a.q, &a.k, &a.v])?;
            let hd = cfg.head_dim;
            (b.slice_cols(&q_and_gate, 2 * hd, 0, hd)?, &a.output)
        }
        Mixer::DeltaNet(d) => {
            let [_, z, _, _] = u.project(b, [&d.qkv, &d.gate, &d.beta, &d.alpha])?;
            (z, &d.out)
        }
    })
}

/// §4: gated full attention with qk-norm and partial NeoX RoPE; returns o, the input of the
/// output projection.
fn attention<B: Backend>(
    b: &B,
    cfg: &Config,
    a: &Attention<B>,
    u: Normed<'_, B::Tensor>,
    k_cache: &mut B::Tensor,
    v_cache: &mut B::Tensor,
    pos0: usize,
) -> Result<B::Tensor, ModelError> {
    // 1. Each head's 2·hd projections are [query | gate]; 2. keys and values.
    let [q_and_gate, k, v] = u.project(b, [&a.q, &a.k, &a.v])?;
    let op = GatedAttention {
        q_and_gate: &q_and_gate,
        k: &k,
        v: &v,
        q_norm: &a.q_norm,
        k_norm: &a.k_norm,
        eps: cfg.rms_eps,
        rope: RopeShape {
            dims: cfg.rope_dims,
            base: cfg.rope_base,
        },
        shape: AttentionShape {
            n_head: cfg.n_head,
            n_kv_head: cfg.n_kv_head,
            head_dim: cfg.head_dim,
        },
    };
    let mut cache = KvCache {
        k: k_cache,
        v: v_cache,
        pos0,
    };
    Ok(match b.gated_attention(&op, &mut cache)? {
        Some(o) => o,
        None => gated_attention_steps(b, &op, &mut cache)?,
    })
}

/// §4 steps 3–6, one op each: 3. per-head RMS norm of q and k, before 4. RoPE on the first
/// rope dims of each head; 5. k and v appended to the cache and causal attention (GQA);
/// 6. the sigmoid output gate. [`Backend::gated_attention`] computes the same in fewer
/// dispatches where a backend has the kernels.
pub fn gated_attention_steps<B: Backend>(
    b: &B,
    op: &GatedAttention<'_, B::Tensor>,
    cache: &mut KvCache<'_, B::Tensor>,
) -> Result<B::Tensor, BackendError> {
    let (hd, rope, pos0) = (op.shape.head_dim, op.rope, cache.pos0);
    let q = b.slice_cols(op.q_and_gate, 2 * hd, 0, hd)?;
    let gate = b.slice_cols(op.q_and_gate, 2 * hd, hd, hd)?;
    let q = b.rms_norm(&q, op.q_norm, op.eps)?;
    let k = b.rms_norm(op.k, op.k_norm, op.eps)?;
    let q = b.rope(&q, hd, rope.dims, rope.base, pos0)?;
    let k = b.rope(&k, hd, rope.dims, rope.base, pos0)?;
    let o = b.attention(&q, &k, op.v, cache, op.shape)?;
    b.sigmoid_mul(&o, &gate)
}

/// §5: Gated DeltaNet; returns o, the input of the output projection.
fn delta_net<B: Backend>(
    b: &B,
    cfg: &Config,
    d: &DeltaNet<B>,
    u: Normed<'_, B::Tensor>,
    conv_state: &mut B::Tensor,
    recurrent: &mut B::Tensor,
) -> Result<B::Tensor, ModelError> {
    let eps = cfg.rms_eps;
    let shape = DeltaNetShape {
        n_k_head: cfg.ssm_k_heads,
        n_v_head: cfg.ssm_v_heads,
        k_dim: cfg.ssm_k_dim,
        v_dim: cfg.ssm_v_dim,
    };
    // 5.1 Projections: m = q|k|v (through the conv), z, β and α inputs (not).
    let [m, z, beta, alpha] = u.project(b, [&d.qkv, &d.gate, &d.beta, &d.alpha])?;
    let conv = ConvQkvNorm {
        m: &m,
        w: &d.conv,
        shape,
        q_scale: 1.0 / (cfg.ssm_k_dim as f32).sqrt(),
        eps,
    };
    let qkv = match b.conv_qkv_norm(&conv, conv_state)? {
        Some(qkv) => qkv,
        None => conv_qkv_norm_steps(b, &conv, conv_state)?,
    };
    let rule = GatedDeltaRule {
        qkv: &qkv,
        alpha: &alpha,
        beta: &beta,
        ssm_a: &d.ssm_a,
        dt_bias: &d.dt_bias,
        shape,
    };
    let o = match b.gated_delta_rule(&rule, recurrent)? {
        Some(o) => o,
        None => gated_delta_rule_steps(b, &rule, recurrent)?,
    };
    // 5.6 Gated RMS norm per value head with silu(z).
    Ok(b.gated_rms_norm(&o, &z, &d.norm, eps)?)
}

/// §5.2 Causal depthwise conv + SiLU over the raw m of the previous tokens (kept in `state`);
/// 5.3 split into q | k | v, q and k L2-normalised per head and q also scaled by
/// `op.q_scale` (1/sqrt(Dk)). [`Backend::conv_qkv_norm`] computes the same in one dispatch
/// where a backend has the kernel.
pub fn conv_qkv_norm_steps<B: Backend>(
    b: &B,
    op: &ConvQkvNorm<'_, B::Tensor>,
    state: &mut B::Tensor,
) -> Result<Qkv<B::Tensor>, BackendError> {
    let shape = op.shape;
    let y = b.conv1d_silu(op.m, op.w, state)?;
    let key_width = shape.n_k_head * shape.k_dim;
    let width = 2 * key_width + shape.n_v_head * shape.v_dim;
    let q = b.slice_cols(&y, width, 0, key_width)?;
    let k = b.slice_cols(&y, width, key_width, key_width)?;
    let v = b.slice_cols(&y, width, 2 * key_width, width - 2 * key_width)?;
    let q = b.l2_norm(&q, shape.k_dim, op.q_scale, op.eps)?;
    let k = b.l2_norm(&k, shape.k_dim, 1.0, op.eps)?;
    Ok(Qkv { q, k, v })
}

/// §5.4 The gated delta rule on the recurrent `state` (value head h reads q/k head h mod Hk),
/// with decay g = ssm_a·softplus(α + dt_bias) and write strength β = sigmoid(β).
/// [`Backend::gated_delta_rule`] computes the gates in the rule's dispatch where a backend has
/// the kernel.
pub fn gated_delta_rule_steps<B: Backend>(
    b: &B,
    op: &GatedDeltaRule<'_, B::Tensor>,
    state: &mut B::Tensor,
) -> Result<B::Tensor, BackendError> {
    let (g, beta) = b.delta_net_gates(op.alpha, op.beta, op.ssm_a, op.dt_bias)?;
    let rule = DeltaRule {
        qkv: op.qkv,
        g: &g,
        beta: &beta,
        shape: op.shape,
    };
    b.delta_rule(&rule, state)
}
