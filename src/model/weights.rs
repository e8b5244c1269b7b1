//! Every tensor of the main stack, pulled by GGUF name and checked against the config (§7.3).
//! Matrices are uploaded in their file format; norms, biases and conv taps as f32 rows.

use std::sync::Arc;

use super::config::{Config, LayerKind};
use super::ModelError;
use crate::backend::Backend;
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant;

pub struct Weights<B: Backend> {
    pub token_embd: B::Weight,
    pub output_norm: B::Tensor,
    /// `output.weight`, or `token_embd.weight` when the file ties them.
    pub output: B::Weight,
    pub layers: Vec<Layer<B>>,
}

pub struct Layer<B: Backend> {
    pub attn_norm: B::Tensor,
    pub post_attention_norm: B::Tensor,
    pub mixer: Mixer<B>,
    /// Benchmarking only (`qwen35 bench --skip`): the forward runs the mixer's projections but
    /// not its token mixing.
    pub skip_mixing: bool,
    pub ffn_gate: B::Weight,
    pub ffn_up: B::Weight,
    pub ffn_down: B::Weight,
}

pub enum Mixer<B: Backend> {
    Attention(Attention<B>),
    DeltaNet(DeltaNet<B>),
}

pub struct Attention<B: Backend> {
    /// Per head: query then output gate.
    pub q: B::Weight,
    pub k: B::Weight,
    pub v: B::Weight,
    pub q_norm: B::Tensor,
    pub k_norm: B::Tensor,
    pub output: B::Weight,
}

pub struct DeltaNet<B: Backend> {
    /// q | k | v, before the conv.
    pub qkv: B::Weight,
    /// z, the output gate.
    pub gate: B::Weight,
    pub beta: B::Weight,
    pub alpha: B::Weight,
    /// One row of taps per channel, oldest first.
    pub conv: B::Tensor,
    pub dt_bias: B::Tensor,
    /// −exp(A_log).
    pub ssm_a: B::Tensor,
    pub norm: B::Tensor,
    pub out: B::Weight,
}

/// Looks tensors up in one file and uploads them to one backend.
struct Loader<'a, B: Backend> {
    file: &'a Arc<GgufFile>,
    backend: &'a B,
    progress: LoadProgress,
}

/// A progress bar on stderr while a large model (1 GiB or more) loads, when stderr is a terminal.
/// GPU backends copy every weight, which takes seconds; the CPU maps the file and fills it at once.
struct LoadProgress {
    total: u64,
    done: std::cell::Cell<u64>,
    shown_percent: std::cell::Cell<u64>,
    enabled: bool,
}

impl LoadProgress {
    const MIN_BYTES: u64 = 1 << 30;

    fn new(file: &GgufFile) -> LoadProgress {
        use std::io::IsTerminal;
        let total = file.tensors().iter().map(|t| t.n_bytes).sum();
        LoadProgress {
            total,
            done: 0.into(),
            shown_percent: 0.into(),
            enabled: total >= Self::MIN_BYTES && std::io::stderr().is_terminal(),
        }
    }

    fn advance(&self, bytes: u64) {
        self.done.set(self.done.get() + bytes);
        let percent = self.done.get() * 100 / self.total.max(1);
        if self.enabled && percent > self.shown_percent.get() {
            self.shown_percent.set(percent);
            let bar = "#".repeat(percent as usize / 4);
            eprint!("\rloading [{bar:<25}] {percent:>3}%");
            if percent >= 100 {
                eprintln!();
            }
        }
    }
}

impl<B: Backend> Loader<'_, B> {
    /// The tensor's info, checked for presence, shape (ggml ne order) and a supported type.
    fn info(&self, name: &str, dims: &[usize]) -> Result<&TensorInfo, ModelError> {
        let info = self
            .file
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor { name: name.into() })?;
        let expected: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        if trim_ones(&info.dims) != trim_ones(&expected) {
            return Err(ModelError::TensorShape {
                name: name.into(),
                expected,
                found: info.dims.clone(),
            });
        }
        if !info.ggml_type.is_supported() {
            return Err(ModelError::UnsupportedType {
                name: name.into(),
                ty: info.ggml_type.name(),
            });
        }
        Ok(info)
    }

    /// A matrix of `rows` rows of `cols` elements (ne = {cols, rows}).
    fn matrix(&self, name: &str, cols: usize, rows: usize) -> Result<B::Weight, ModelError> {
        let info = self.info(name, &[cols, rows])?;
        let weight = self
            .backend
            .upload_weight(self.file, info)
            .map_err(|source| ModelError::Upload {
                name: name.into(),
                source,
            })?;
        self.progress.advance(info.n_bytes);
        Ok(weight)
    }

    /// A tensor of `rows × cols` (ne = {cols, rows}) dequantized to f32.
    fn dense(&self, name: &str, cols: usize, rows: usize) -> Result<B::Tensor, ModelError> {
        let dims: &[usize] = if rows == 1 { &[cols] } else { &[cols, rows] };
        let info = self.info(name, dims)?;
        self.progress.advance(info.n_bytes);
        let values = quant::dequantize(info.ggml_type, self.file.tensor_data(info), rows * cols)
            .map_err(|source| ModelError::Dequantize {
                name: name.into(),
                source,
            })?;
        self.backend
            .upload(rows, cols, &values)
            .map_err(|source| ModelError::Upload {
                name: name.into(),
                source,
            })
    }

    fn vector(&self, name: &str, len: usize) -> Result<B::Tensor, ModelError> {
        self.dense(name, len, 1)
    }
}

/// ne without trailing 1s: {n} and {n, 1} are the same tensor.
fn trim_ones(dims: &[u64]) -> &[u64] {
    let keep = dims.iter().rposition(|&d| d != 1).map_or(0, |i| i + 1);
    &dims[..keep]
}

impl<B: Backend> Weights<B> {
    pub fn load(file: &Arc<GgufFile>, cfg: &Config, backend: &B) -> Result<Weights<B>, ModelError> {
        let l = Loader {
            file,
            backend,
            progress: LoadProgress::new(file),
        };
        let d = cfg.n_embd;
        let output = if file.tensor("output.weight").is_some() {
            l.matrix("output.weight", d, cfg.vocab)?
        } else {
            l.matrix("token_embd.weight", d, cfg.vocab)?
        };
        let layers = cfg
            .layers
            .iter()
            .enumerate()
            .map(|(i, &kind)| Layer::load(&l, cfg, i, kind))
            .collect::<Result<_, _>>()?;
        Ok(Weights {
            token_embd: l.matrix("token_embd.weight", d, cfg.vocab)?,
            output_norm: l.vector("output_norm.weight", d)?,
            output,
            layers,
        })
    }
}

impl<B: Backend> Layer<B> {
    fn load(
        l: &Loader<B>,
        cfg: &Config,
        i: usize,
        kind: LayerKind,
    ) -> Result<Layer<B>, ModelError> {
        let name = |suffix: &str| format!("blk.{i}.{suffix}");
        let d = cfg.n_embd;
        let mixer = match kind {
            LayerKind::FullAttention => {
                let (hd, q_width) = (cfg.head_dim, cfg.n_head * cfg.head_dim);
                let kv_width = cfg.n_kv_head * hd;
                Mixer::Attention(Attention {
                    q: l.matrix(&name("attn_q.weight"), d, 2 * q_width)?,
                    k: l.matrix(&name("attn_k.weight"), d, kv_width)?,
                    v: l.matrix(&name("attn_v.weight"), d, kv_width)?,
                    q_norm: l.vector(&name("attn_q_norm.weight"), hd)?,
                    k_norm: l.vector(&name("attn_k_norm.weight"), hd)?,
                    output: l.matrix(&name("attn_output.weight"), q_width, d)?,
                })
            }
            LayerKind::DeltaNet => {
                let (hv, value_width) = (cfg.ssm_v_heads, cfg.ssm_value_width());
                Mixer::DeltaNet(DeltaNet {
                    qkv: l.matrix(&name("attn_qkv.weight"), d, cfg.conv_channels())?,
                    gate: l.matrix(&name("attn_gate.weight"), d, value_width)?,
                    beta: l.matrix(&name("ssm_beta.weight"), d, hv)?,
                    alpha: l.matrix(&name("ssm_alpha.weight"), d, hv)?,
                    conv: l.dense(
                        &name("ssm_conv1d.weight"),
                        cfg.conv_kernel,
                        cfg.conv_channels(),
                    )?,
                    dt_bias: l.vector(&name("ssm_dt.bias"), hv)?,
                    ssm_a: l.vector(&name("ssm_a"), hv)?,
                    norm: l.vector(&name("ssm_norm.weight"), cfg.ssm_v_dim)?,
                    out: l.matrix(&name("ssm_out.weight"), value_width, d)?,
                })
            }
        };
        Ok(Layer {
            attn_norm: l.vector(&name("attn_norm.weight"), d)?,
            post_attention_norm: l.vector(&name("post_attention_norm.weight"), d)?,
            mixer,
            skip_mixing: false,
            ffn_gate: l.matrix(&name("ffn_gate.weight"), d, cfg.n_ff)?,
            ffn_up: l.matrix(&name("ffn_up.weight"), d, cfg.n_ff)?,
            ffn_down: l.matrix(&name("ffn_down.weight"), cfg.n_ff, d)?,
        })
    }
}
