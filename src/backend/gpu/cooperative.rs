//! Cooperative matrices (tensor cores) for the prefill GEMM and attention: whether the adapter has
//! the shape the kernels use, the experimental opt-in wgpu asks for, the GEMM itself (the
//! attention is in attention_prefill.rs), and a check at startup that the GEMM agrees with the
//! f32 one before any model runs on it. The chunked delta rule's kernel on them (delta_chunks.rs)
//! needs the same features.
//!
//! The kernel multiplies f16 matrices. x is converted once per call (a SwiGLU input computed as
//! it is converted) and the weight rows are decoded chunk by chunk into an f16 scratch matrix,
//! each element once, by invocations that read neighbouring blocks together, or kept decoded
//! within a memory budget; decoding inside the GEMM's tiles instead would have each lane of a
//! subgroup read a different row, one byte at a time, and starve the tensor cores.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::kernels::{CooperativeShape, Kernel, Pipelines};
use super::memory::{HalfMatrix, WeightPart};
use super::ops::{f32_bytes, lock, MatmulInput, WG};
use super::{GpuError, GpuTensor, GpuWeight, Wgpu};
use crate::quant::GgmlType;

/// What the cooperative GEMM kernel needs besides the shape: f16 tiles and subgroup ids.
pub const FEATURES: wgpu::Features = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::SUBGROUP);

/// Weight rows and tokens per workgroup tile of gemm_coop.wgsl (WGSL `TILE`); the f16 copies of
/// x and of the weights are padded to whole tiles.
const TILE: usize = 128;
/// Columns per step of gemm_coop.wgsl (WGSL `DEPTH`); the f16 scratch rows are padded to it.
const DEPTH: usize = 64;
/// Bytes of f16 weight scratch at most: larger weights are decoded and multiplied in chunks of
/// rows.
const MAX_SCRATCH_BYTES: u64 = 256 << 20;

/// Least cosine between the cooperative and the f32 GEMM on the startup check: f16 rounding of
/// both operands leaves ~1e-7; a wrong layout or a broken driver leaves far less.
const MIN_AGREEMENT: f64 = 0.9999;

/// The block shape of the cooperative GEMM and attention (whichever `options` turn on) on
/// `adapter`, else why they cannot run there.
pub fn support(
    adapter: &wgpu::Adapter,
    options: &super::GpuOptions,
) -> Result<CooperativeShape, String> {
    if !options.cooperative_matrix && !options.cooperative_attention {
        return Err("turned off".into());
    }
    if !options.subgroups {
        return Err("subgroup operations are off".into());
    }
    let missing: Vec<&str> = [
        (
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
            "cooperative matrices",
        ),
        (wgpu::Features::SHADER_F16, "f16"),
        (wgpu::Features::SUBGROUP, "subgroups"),
    ]
    .into_iter()
    .filter(|&(feature, _)| !adapter.features().contains(feature))
    .map(|(_, name)| name)
    .collect();
    if !missing.is_empty() {
        return Err(format!("the adapter lacks {}", missing.join(", ")));
    }
    let info = adapter.get_info();
    if info.subgroup_min_size != info.subgroup_max_size {
        return Err(format!(
            "subgroups of {}..={} invocations, the kernels need one fixed size",
            info.subgroup_min_size, info.subgroup_max_size
        ));
    }
    let offered = adapter.cooperative_matrix_properties();
    let has_block = |block: usize| {
        offered.iter().any(|s| {
            (s.m_size, s.n_size, s.k_size) == (block as u32, block as u32, block as u32)
                && s.ab_type == wgpu::CooperativeScalarType::F16
                && s.cr_type == wgpu::CooperativeScalarType::F32
        })
    };
    CooperativeShape::ALL
        .into_iter()
        .find(|shape| has_block(shape.block) && shape.subgroup == info.subgroup_min_size as usize)
        .ok_or_else(|| {
            format!(
                "no f16 → f32 block shape the kernels take ({}) among the {} offered with \
                 subgroups of {}",
                CooperativeShape::ALL
                    .map(|s| format!("{0}×{0}×{0} with subgroups of {1}", s.block, s.subgroup))
                    .join(", "),
                offered.len(),
                info.subgroup_min_size
            )
        })
}

/// The opt-in wgpu requires for `EXPERIMENTAL_*` features, given only when they are requested.
pub fn experimental_features(requested: bool) -> wgpu::ExperimentalFeatures {
    if requested {
        // SAFETY: the one experimental feature requested is cooperative matrices; only the GEMM
        // and attention kernels use them, the GEMM's results checked against the f32 kernel
        // before use (`Wgpu::cooperative_gemm_agrees`).
        unsafe { wgpu::ExperimentalFeatures::enabled() }
    } else {
        wgpu::ExperimentalFeatures::disabled()
    }
}

/// Builds the cooperative GEMM's (or with `attention` the attention's) pipelines; false (with
/// the reason logged) if the device rejects them.
pub fn add_pipelines(pipelines: &mut Pipelines, device: &wgpu::Device, attention: bool) -> bool {
    match pipelines.add_cooperative(device, attention) {
        Ok(()) => true,
        Err(e) if attention => {
            log::warn!("wgpu: prefill attention in f32 (cooperative kernels rejected: {e})");
            false
        }
        Err(e) => {
            log::warn!("wgpu: prefill GEMM in f32 tiles (cooperative kernels rejected: {e})");
            false
        }
    }
}

/// Builds the chunked delta rule's pipeline on cooperative matrices, apart from the GEMM's so
/// that either runs without the other; false (with the reason logged) if the device rejects it.
pub fn add_delta_rule_pipeline(pipelines: &mut Pipelines, device: &wgpu::Device) -> bool {
    match pipelines.add(device, Kernel::DeltaRuleChunkedCoop) {
        Ok(()) => {
            log::info!("wgpu: chunked delta rule on cooperative matrices (f16 → f32)");
            true
        }
        Err(e) => {
            log::warn!(
                "wgpu: chunked delta rule in f32 (its cooperative kernel was rejected: {e})"
            );
            false
        }
    }
}

/// A reproducible value in [-1, 1) for element i of a check operand.
fn check_value(i: usize, stride: usize, modulus: usize) -> f32 {
    (i * stride % modulus) as f32 * 2.0 / modulus as f32 - 1.0
}

/// Rows and columns of x's f16 copy for the cooperative GEMM: whole tiles of tokens and whole
/// steps of columns.
fn half_activation_dims(x: &GpuTensor) -> (usize, usize) {
    (
        x.rows.next_multiple_of(TILE),
        x.cols.next_multiple_of(DEPTH),
    )
}

/// Rows and columns of the f16 copy of `rows` rows of `w`: whole tiles of rows and whole
/// steps of columns.
fn half_weight_dims(w: &GpuWeight, rows: usize) -> (usize, usize) {
    (rows.next_multiple_of(TILE), w.cols.next_multiple_of(DEPTH))
}

impl Wgpu {
    /// `y = x · Wᵀ` on cooperative matrices (x computed as it is converted where the input is
    /// a SwiGLU): x to f16 once (and reused by the next GEMM of the same input), then for each
    /// chunk of weight rows (within a part) one dispatch decoding it to f16, unless its copy is
    /// kept, and one GEMM over it.
    pub(super) fn gemm_cooperative(
        &self,
        input: MatmulInput<'_>,
        w: &GpuWeight,
    ) -> Result<GpuTensor, GpuError> {
        let (x, up) = match input {
            MatmulInput::Plain(x) => (x, None),
            MatmulInput::Swiglu { gate, up } => (gate, Some(up)),
        };
        let out = self.output(x.rows, w.rows)?;
        let (x16_rows, x16_cols) = half_activation_dims(x);
        let row_bytes = (x16_cols * 2) as u64;
        let chunk_rows = (MAX_SCRATCH_BYTES.min(self.binding_limit) / row_bytes) as usize / TILE;
        let chunk_rows = chunk_rows.max(1) * TILE;
        let token_tiles = x16_rows / TILE;
        let multiply = |x16: &GpuTensor| {
            for (index, part) in w.parts.iter().enumerate() {
                for first in (0..part.rows).step_by(chunk_rows) {
                    let rows = chunk_rows.min(part.rows - first);
                    let w16 = self.weight_halves(w, index, first, rows)?;
                    let row_tiles = w16.rows / TILE;
                    let tiles = row_tiles * token_tiles;
                    self.record(
                        Kernel::GemmCoop,
                        &[
                            rows as u32,
                            x.rows as u32,
                            x16_cols as u32,
                            w.rows as u32,
                            (part.first_row + first) as u32,
                            row_tiles as u32,
                            tiles as u32,
                            0,
                        ],
                        &[&x16.buffer, &w16.words.buffer, &out.buffer],
                        tiles,
                        ((x16_rows + w16.rows) * x16_cols * 2) as u64,
                    )?;
                }
            }
            Ok(())
        };
        let key = (x.buffer.clone(), up.map(|u| u.buffer.clone()), x.dims());
        let convert = || self.half_activations(x, up).map(|x16| x16.words);
        self.reuse(&self.last_half, key, convert, multiply)?;
        Ok(out)
    }

    /// x (silu(x) ⊙ up with `up`) as f16, padded with zeros to whole tiles of tokens and
    /// columns ([`half_activation_dims`]), two halves a word.
    fn half_activations(
        &self,
        x: &GpuTensor,
        up: Option<&GpuTensor>,
    ) -> Result<HalfMatrix, GpuError> {
        let (rows, cols) = half_activation_dims(x);
        let words = self.output(rows, cols / 2)?;
        let n = words.len();
        self.record(
            Kernel::HalfActivations,
            &[
                x.rows as u32,
                x.cols as u32,
                rows as u32,
                cols as u32,
                up.is_some() as u32,
                0,
                0,
                0,
            ],
            &[&x.buffer, &words.buffer, &up.unwrap_or(x).buffer],
            n.div_ceil(WG),
            f32_bytes(&[x]) * if up.is_some() { 2 } else { 1 },
        )?;
        Ok(HalfMatrix { rows, cols, words })
    }

    /// Rows `first..first + rows` of part `index` of a weight in f16 for the GEMM: the weight's
    /// kept copy, decoded now if this is the chunk's first GEMM and the copies' budget
    /// ([`super::GpuOptions::f16_weight_copies`]) holds it; else decoded into scratch for this
    /// GEMM alone. When the GPU has no memory for a copy, no more are kept (and if the scratch
    /// does not fit either, the copies kept are let go: [`Wgpu::let_copies_go`]).
    fn weight_halves(
        &self,
        w: &GpuWeight,
        index: usize,
        first: usize,
        rows: usize,
    ) -> Result<Arc<HalfMatrix>, GpuError> {
        let part = &w.parts[index];
        let key = (part.buffer.clone(), first);
        // Held while the copy is decoded, so that no other GEMM decodes it too.
        let mut copies = lock(&self.f16_copies)?;
        if let Some(copy) = copies.get(&key) {
            return Ok(Arc::clone(copy));
        }
        let scratch = || self.half_weights(w, part, first, rows).map(Arc::new);
        let (padded_rows, cols) = half_weight_dims(w, rows);
        let bytes = (padded_rows * cols * 2) as u64;
        let budgeted = (!self.f16_copies_auto || self.room_for_copy(bytes))
            && self
                .f16_copies_left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(bytes)
                })
                .is_ok();
        if !budgeted {
            drop(copies);
            return scratch();
        }
        match self.half_weights(w, part, first, rows) {
            Ok(copy) => {
                let copy = Arc::new(copy);
                copies.insert(key, Arc::clone(&copy));
                Ok(copy)
            }
            Err(GpuError::OutOfMemory { needed, .. }) => {
                drop(copies);
                log::info!(
                    "wgpu: no memory for more f16 weight copies ({needed} bytes for {}): the \
                     weights not yet copied are decoded in every prefill",
                    w.name
                );
                self.f16_copies_left.store(0, Ordering::Relaxed);
                scratch()
            }
            Err(e) => Err(e),
        }
    }

    /// Rows `first..first + rows` of a weight part decoded to f16, padded with zeros to whole
    /// tiles of rows and columns.
    fn half_weights(
        &self,
        w: &GpuWeight,
        part: &WeightPart,
        first: usize,
        rows: usize,
    ) -> Result<HalfMatrix, GpuError> {
        let (padded_rows, cols) = half_weight_dims(w, rows);
        let words = self.output(padded_rows, cols / 2)?;
        let span = w.format.half_weights_span();
        self.record(
            Kernel::HalfWeights(w.format),
            &[
                rows as u32,
                w.cols as u32,
                w.row_bytes as u32,
                first as u32,
                padded_rows as u32,
                cols as u32,
                0,
                0,
            ],
            &[&part.buffer, &words.buffer],
            (padded_rows * cols / span).div_ceil(WG),
            (rows * w.row_bytes) as u64,
        )?;
        Ok(HalfMatrix {
            rows: padded_rows,
            cols,
            words,
        })
    }

    /// Rows `first..first + rows` of weight part `part` as the f16 scratch matrix the cooperative
    /// GEMM multiplies: the halves' bits, row by row, padded with zeros to whole tiles of rows and
    /// columns. Builds the format's decoder if the device has no cooperative GEMM, so that the
    /// decoders are tested where the GEMM cannot run (lavapipe).
    pub fn half_weight_rows(
        &mut self,
        w: &GpuWeight,
        part: usize,
        first: usize,
        rows: usize,
    ) -> Result<Vec<Vec<u16>>, GpuError> {
        let shape_error = |detail: String| GpuError::Shape {
            op: "half_weight_rows",
            detail,
        };
        let part = w
            .parts
            .get(part)
            .ok_or_else(|| shape_error(format!("part {part} of a weight of {}", w.parts.len())))?;
        if rows == 0 || rows > part.rows.saturating_sub(first) {
            return Err(shape_error(format!(
                "rows {first}..{} of a part of {}",
                first.saturating_add(rows),
                part.rows
            )));
        }
        let kernel = Kernel::HalfWeights(w.format);
        if self.pipelines.get(kernel).is_err() {
            self.pipelines.add(&self.device, kernel)?;
        }
        let m = self.half_weights(w, part, first, rows)?;
        let words = self.read_rows(&m.words, 0, m.rows)?;
        let halves: Vec<u16> = words
            .iter()
            .flat_map(|w| {
                let bits = w.to_bits();
                [bits as u16, (bits >> 16) as u16]
            })
            .collect();
        Ok(halves.chunks_exact(m.cols).map(<[u16]>::to_vec).collect())
    }

    /// Runs one GEMM on both kernels, at sizes that cross tile edges and weight parts, and
    /// tells whether the cooperative result agrees with the f32 one (logging the outcome). A
    /// device error on the way also means no.
    pub(super) fn cooperative_gemm_agrees(&self) -> bool {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let agreement = self.cooperative_gemm_agreement();
        let scope_error = pollster::block_on(scope.pop());
        match (agreement, scope_error) {
            (Ok(cosine), None) if cosine >= MIN_AGREEMENT => {
                let block = self.pipelines.cooperative_shape().map_or(0, |s| s.block);
                log::info!(
                    "wgpu: prefill GEMM on cooperative matrices ({block}×{block}×{block} f16 → \
                     f32; startup check cosine {cosine:.9} against f32)"
                );
                true
            }
            (Ok(cosine), None) => {
                log::warn!(
                    "wgpu: prefill GEMM in f32 tiles: the cooperative kernel disagrees with it \
                     (cosine {cosine:.9} < {MIN_AGREEMENT})"
                );
                false
            }
            (Err(e), _) => {
                log::warn!("wgpu: prefill GEMM in f32 tiles: the cooperative check failed: {e}");
                false
            }
            (_, Some(e)) => {
                log::warn!("wgpu: prefill GEMM in f32 tiles: the cooperative check failed: {e}");
                false
            }
        }
    }

    /// The cosine between the cooperative and the f32 GEMM of the startup check.
    fn cooperative_gemm_agreement(&self) -> Result<f64, GpuError> {
        let (rows, cols, tokens) = (150, 300, 140);
        let w: Vec<f32> = (0..rows * cols).map(|i| check_value(i, 53, 97)).collect();
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| check_value(i, 37, 101))
            .collect();
        let weight = self.upload_weight_in_parts(
            "cooperative check",
            GgmlType::F32,
            rows,
            cols,
            bytemuck::cast_slice(&w),
            70,
        )?;
        let x = self.upload(tokens, cols, &x)?;
        let plain = self.gemm(&x, &weight)?;
        let cooperative = self.gemm_cooperative(MatmulInput::Plain(&x), &weight)?;
        Ok(crate::compare::cosine(
            &self.read_rows(&cooperative, 0, tokens)?,
            &self.read_rows(&plain, 0, tokens)?,
        ))
    }
}

/// The f16 scratch kernels against the CPU decoders on whatever adapter wgpu finds (lavapipe in
/// CI, which runs them though it has no cooperative matrices for the GEMM itself).
#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// A device with the scratch kernels built, if there is one; with `q6_k_aligned` its Q6_K
    /// blocks padded to whole words.
    fn scratch_gpu(q6_k_aligned: bool) -> Option<Wgpu> {
        let mut gpu = super::super::test_gpu_with(&super::super::GpuOptions {
            q6_k_aligned,
            ..Default::default()
        })?;
        let mut kernels = vec![Kernel::HalfActivations];
        kernels.extend(super::super::WeightFormat::ALL.map(Kernel::HalfWeights));
        for kernel in kernels {
            gpu.pipelines.add(&gpu.device, kernel).unwrap();
        }
        Some(gpu)
    }

    fn read_halves(gpu: &Wgpu, m: &HalfMatrix) -> Vec<f32> {
        let words = gpu.read_rows(&m.words, 0, m.rows).unwrap();
        assert_eq!(words.len() * 2, m.rows * m.cols);
        words
            .iter()
            .flat_map(|w| {
                let bits = w.to_bits();
                [bits as u16, (bits >> 16) as u16].map(|h| f16::from_bits(h).to_f32())
            })
            .collect()
    }

    /// Within f16 rounding of `want`.
    fn assert_half_of(what: &str, got: f32, want: f32) {
        let err = (got - want).abs();
        assert!(err <= want.abs() * 1e-3 + 1e-7, "{what}: {got} for {want}");
    }

    #[test]
    fn scratch_matrices_hold_f16_values_padded_with_zeros() {
        let Some(gpu) = scratch_gpu(false) else {
            return;
        };
        let (tokens, cols) = (70, 37);
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| check_value(i, 37, 101) * if i % 50 == 0 { 1e6 } else { 3.0 })
            .collect();
        let xt = gpu.upload(tokens, cols, &x).unwrap();
        let x16 = gpu.half_activations(&xt, None).unwrap();
        assert_eq!((x16.rows, x16.cols), (TILE, 64));
        let got = read_halves(&gpu, &x16);
        for t in 0..x16.rows {
            for c in 0..x16.cols {
                let want = match (t < tokens, c < cols) {
                    (true, true) => x[t * cols + c].clamp(-65504.0, 65504.0),
                    _ => 0.0,
                };
                assert_half_of(&format!("x[{t}, {c}]"), got[t * x16.cols + c], want);
            }
        }

        let rows = 45;
        let aligned = scratch_gpu(true).expect("the adapter opened once already");
        for ty in [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ] {
            let cols = if ty.block_elems() == 1 { 40 } else { 512 };
            let values: Vec<f32> = (0..rows * cols).map(|i| check_value(i, 53, 97)).collect();
            let mut bytes = Vec::new();
            for row in values.chunks_exact(cols) {
                crate::quant::quantize_row(ty, row, &mut bytes).unwrap();
            }
            // Q6_K also with its blocks padded to whole words on the device.
            for device in [&gpu, &aligned] {
                let weight = device
                    .upload_weight_in_parts("w", ty, rows, cols, &bytes, 20)
                    .unwrap();
                // Rows 3..15 of the second part: weight rows 23..35.
                let (first, count) = (3, 12);
                let w16 = device
                    .half_weights(&weight, &weight.parts[1], first, count)
                    .unwrap();
                assert_eq!((w16.rows, w16.cols), (TILE, cols.next_multiple_of(DEPTH)));
                let got = read_halves(device, &w16);
                let row_bytes = bytes.len() / rows;
                let mut decoded = vec![0f32; cols];
                for r in 0..w16.rows {
                    if r < count {
                        let at = (20 + first + r) * row_bytes;
                        crate::quant::dequantize_row(ty, &bytes[at..at + row_bytes], &mut decoded)
                            .unwrap();
                    }
                    for c in 0..w16.cols {
                        let want = if r < count && c < cols {
                            decoded[c]
                        } else {
                            0.0
                        };
                        let got = got[r * w16.cols + c];
                        assert_half_of(&format!("{ty:?} w[{r}, {c}]"), got, want);
                    }
                }
            }
        }
    }
}
