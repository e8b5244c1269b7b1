//! Random tensor data, generated fast enough that writing a 15 GB model is disk-bound.
//!
//! Quantizing billions of fresh random values would dominate the run, so each matrix is tiled
//! from a pool of pre-encoded 256-element chunks: the pool holds `POOL_CHUNKS` chunks of
//! N(0, std²) values encoded once in the tensor's type, and every row picks its chunks at random.
//! Rows are then distinct and every block is a valid, well-scaled encoding; the entries are not
//! i.i.d., which a synthetic model does not need. Small tensors (norms, conv, 1-D) are drawn
//! value by value.

use super::plan::{Init, PlannedTensor};
use crate::quant::{quantize_row, GgmlType, QuantError};
use std::collections::HashMap;

/// Elements per pool chunk: a whole number of blocks of every supported type.
pub const CHUNK_ELEMS: u64 = 256;
const POOL_CHUNKS: usize = 1024;

/// SplitMix64: tiny, fast, and good enough for weights; seeds are mixed through it too.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for item `index` of the stream `seed`, independent of the others.
    pub fn derive(seed: u64, index: u64) -> Rng {
        let mut mixer = Rng(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        Rng(mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 + 1.0) / (1u64 << 24) as f32
    }

    /// Standard normal (Box–Muller; one of the pair is enough here).
    fn normal(&mut self) -> f32 {
        let radius = (-2.0 * self.uniform().ln()).sqrt();
        radius * (std::f32::consts::TAU * self.uniform()).cos()
    }

    fn value(&mut self, init: Init) -> f32 {
        match init {
            Init::Normal { std } => std * self.normal(),
            Init::NearOne => 1.0 + 0.1 * self.normal(),
            // −exp(A_log) with exp(A_log) uniform in [0.05, 2]: decays from fast to slow.
            Init::NegativeDecay => -(0.05 + 1.95 * self.uniform()),
            Init::DtBias => -1.0 + 0.5 * self.normal(),
        }
    }
}

/// Pre-encoded chunks of one (type, init).
pub struct ChunkPool {
    chunk_bytes: usize,
    data: Vec<u8>,
}

/// What a pool is keyed by: matrices of the same type and scale share one.
pub type PoolKey = (GgmlType, u32);

/// The pool key of a tensor that is tiled from a pool, or None when it is drawn value by value.
pub fn pool_key(tensor: &PlannedTensor) -> Option<PoolKey> {
    let tiled = tensor.dims.len() >= 2
        && tensor
            .dims
            .first()
            .is_some_and(|ne0| ne0 % CHUNK_ELEMS == 0)
        && CHUNK_ELEMS.is_multiple_of(tensor.ggml_type.block_elems() as u64);
    match tensor.init {
        Init::Normal { std } if tiled => Some((tensor.ggml_type, std.to_bits())),
        _ => None,
    }
}

impl ChunkPool {
    pub fn new(key: PoolKey, seed: u64) -> Result<ChunkPool, QuantError> {
        let (ty, std_bits) = key;
        let init = Init::Normal {
            std: f32::from_bits(std_bits),
        };
        let mut rng = Rng::derive(seed, u64::from(ty.id()) << 32 | u64::from(std_bits));
        let values: Vec<f32> = (0..POOL_CHUNKS * CHUNK_ELEMS as usize)
            .map(|_| rng.value(init))
            .collect();
        let mut data = Vec::new();
        quantize_row(ty, &values, &mut data)?;
        Ok(ChunkPool {
            chunk_bytes: data.len() / POOL_CHUNKS,
            data,
        })
    }

    /// Appends `n_chunks` randomly chosen chunks to `out`.
    fn fill(&self, rng: &mut Rng, n_chunks: u64, out: &mut Vec<u8>) {
        for _ in 0..n_chunks {
            let start = (rng.next_u64() % POOL_CHUNKS as u64) as usize * self.chunk_bytes;
            out.extend_from_slice(&self.data[start..start + self.chunk_bytes]);
        }
    }
}

/// The encoded rows `rows` of `tensor`, drawn from `rng` (tiled from its pool when it has one).
pub fn generate_rows(
    tensor: &PlannedTensor,
    rows: std::ops::Range<u64>,
    pools: &HashMap<PoolKey, ChunkPool>,
    rng: &mut Rng,
    out: &mut Vec<u8>,
) -> Result<(), QuantError> {
    let ne0 = tensor.dims.first().copied().unwrap_or(1);
    if let Some(pool) = pool_key(tensor).and_then(|key| pools.get(&key)) {
        pool.fill(rng, (rows.end - rows.start) * (ne0 / CHUNK_ELEMS), out);
        return Ok(());
    }
    let mut row = vec![0.0f32; ne0 as usize];
    for _ in rows {
        row.iter_mut().for_each(|x| *x = rng.value(tensor.init));
        quantize_row(tensor.ggml_type, &row, out)?;
    }
    Ok(())
}
