//! Per-sequence state: a KV cache per attention layer, conv and recurrent state per DeltaNet
//! layer (§4, §5), f32 on the backend except KV caches the backend stores otherwise
//! ([`Backend::kv_cache`]: f16 on a GPU with `--f16-kv-cache`); snapshots are f32 host copies,
//! bit-exact to what the backend holds.

use super::config::{Config, LayerKind};
use super::ModelError;
use crate::backend::Backend;

pub struct State<B: Backend> {
    pub layers: Vec<LayerState<B>>,
    /// Tokens consumed so far: the position of the next token.
    pub position: usize,
    /// Cache slots per attention layer.
    pub context_len: usize,
}

pub enum LayerState<B: Backend> {
    /// Rows = positions, cols = kv heads × head_dim.
    Attention { k: B::Tensor, v: B::Tensor },
    /// `conv`: raw qkv inputs of the last taps−1 tokens (oldest first);
    /// `recurrent`: one k_dim × v_dim matrix per value head, key index major.
    DeltaNet {
        conv: B::Tensor,
        recurrent: B::Tensor,
    },
}

/// A host copy of a [`State`]: KV caches up to the position, conv and recurrent state whole.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    position: usize,
    /// Per layer, the layer's state tensors in declaration order.
    tensors: Vec<[Vec<f32>; 2]>,
}

impl Snapshot {
    /// The position of the next token after restoring.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Rebuilds a snapshot from [`Snapshot::tensors`] (e.g. read from a file); restoring it
    /// checks every size against the engine's state.
    pub fn from_parts(position: usize, tensors: Vec<[Vec<f32>; 2]>) -> Snapshot {
        Snapshot { position, tensors }
    }

    /// Per layer, the layer's state tensors in declaration order.
    pub fn tensors(&self) -> &[[Vec<f32>; 2]] {
        &self.tensors
    }

    /// The host memory the snapshot's values take.
    pub fn bytes(&self) -> usize {
        let values: usize = self.tensors.iter().flatten().map(Vec::len).sum();
        values * std::mem::size_of::<f32>()
    }
}

impl<B: Backend> State<B> {
    pub fn new(backend: &B, cfg: &Config, context_len: usize) -> State<B> {
        let layers = cfg
            .layers
            .iter()
            .map(|kind| match kind {
                LayerKind::FullAttention => {
                    let width = cfg.n_kv_head * cfg.head_dim;
                    LayerState::Attention {
                        k: backend.kv_cache(context_len, width),
                        v: backend.kv_cache(context_len, width),
                    }
                }
                LayerKind::DeltaNet => LayerState::DeltaNet {
                    conv: backend.zeros(cfg.conv_kernel - 1, cfg.conv_channels()),
                    recurrent: backend.zeros(cfg.ssm_v_heads, cfg.ssm_k_dim * cfg.ssm_v_dim),
                },
            })
            .collect();
        State {
            layers,
            position: 0,
            context_len,
        }
    }

    /// Back to an empty sequence. KV rows past the position are never read, so only the
    /// recurrent layers are cleared.
    pub fn reset(&mut self, backend: &B) {
        for layer in &mut self.layers {
            if let LayerState::DeltaNet { conv, recurrent } = layer {
                let (r, c) = backend.dims(conv);
                *conv = backend.zeros(r, c);
                let (r, c) = backend.dims(recurrent);
                *recurrent = backend.zeros(r, c);
            }
        }
        self.position = 0;
    }

    pub fn snapshot(&self, backend: &B) -> Snapshot {
        let whole = |t: &B::Tensor| backend.read_rows(t, 0, backend.dims(t).0);
        let tensors = self
            .layers
            .iter()
            .map(|layer| match layer {
                LayerState::Attention { k, v } => [
                    backend.read_rows(k, 0, self.position),
                    backend.read_rows(v, 0, self.position),
                ],
                LayerState::DeltaNet { conv, recurrent } => [whole(conv), whole(recurrent)],
            })
            .collect();
        Snapshot {
            position: self.position,
            tensors,
        }
    }

    /// Puts a snapshot of a state of this shape back; on error the state is unchanged.
    pub fn restore(&mut self, backend: &B, snapshot: &Snapshot) -> Result<(), ModelError> {
        let mismatch = |reason: String| ModelError::SnapshotMismatch { reason };
        if snapshot.tensors.len() != self.layers.len() {
            return Err(mismatch(format!(
                "{} layers, engine has {}",
                snapshot.tensors.len(),
                self.layers.len()
            )));
        }
        if snapshot.position > self.context_len {
            return Err(mismatch(format!(
                "position {} beyond context {}",
                snapshot.position, self.context_len
            )));
        }
        // Check every size before writing anything.
        for (i, (layer, [a, b])) in self.layers.iter().zip(&snapshot.tensors).enumerate() {
            let (ta, tb, rows) = match layer {
                LayerState::Attention { k, v } => (k, v, [snapshot.position; 2]),
                LayerState::DeltaNet { conv, recurrent } => (
                    conv,
                    recurrent,
                    [backend.dims(conv).0, backend.dims(recurrent).0],
                ),
            };
            let expected = [rows[0] * backend.dims(ta).1, rows[1] * backend.dims(tb).1];
            if [a.len(), b.len()] != expected {
                return Err(mismatch(format!(
                    "layer {i}: {} + {} values, expected {} + {}",
                    a.len(),
                    b.len(),
                    expected[0],
                    expected[1]
                )));
            }
        }
        for (layer, [a, b]) in self.layers.iter_mut().zip(&snapshot.tensors) {
            let (ta, tb) = match layer {
                LayerState::Attention { k, v } => (k, v),
                LayerState::DeltaNet { conv, recurrent } => (conv, recurrent),
            };
            backend.write_rows(ta, 0, a)?;
            backend.write_rows(tb, 0, b)?;
        }
        self.position = snapshot.position;
        Ok(())
    }
}
