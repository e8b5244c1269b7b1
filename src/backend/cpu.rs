//! The reference backend: f32 activations in host memory, ops computed at once, matmul and the
//! per-head ops spread over a dedicated rayon pool. Weights stay in the memory-mapped file.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;

use super::{
    checks, rms_norm_matmul_each, sample_on_host, AttentionShape, Backend, BackendError,
    BackendStats, ConvQkvNorm, DeltaRule, GatedAttention, GatedDeltaRule, KvCache, OpTiming,
    PendingRead, Qkv,
};
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::{self, GgmlType};
use crate::sample::Draw;

pub struct CpuBackend {
    pool: rayon::ThreadPool,
    mode: CpuMode,
    profiler: Profiler,
    /// A `zeros` the allocator refused (the trait's `zeros` cannot fail); see `status`.
    allocation_failure: std::sync::Mutex<Option<String>>,
}

/// How matmuls treat activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuMode {
    /// f32 activations against dequantized weights: the reference every test compares with.
    #[default]
    Exact,
    /// Activations quantized to 14-bit integers once per matmul (256-value blocks) and
    /// integer dot products with Q4_K, Q6_K and Q8_0 weights (llama.cpp's CPU backend does the
    /// same with 8 bits, which moves logits far more); other weight formats and rows not a
    /// multiple of 256 stay exact.
    Fast,
}

/// Weight bytes one pool task should at least read, so that scheduling stays a small part of
/// the work on any row size.
const TASK_BYTES: usize = 64 * 1024;

/// Values an elementwise task should at least take: smaller ops (decode's single rows) run on
/// the calling thread, whose wake-up of another worker would cost more than the work.
const ELEMENTWISE_TASK: usize = 16 * 1024;

/// Wall-clock time per op class for `qwen35 bench --profile`. Off, an op pays one relaxed load.
#[derive(Default)]
struct Profiler {
    on: AtomicBool,
    stats: Mutex<BackendStats>,
}

impl Profiler {
    /// The counters; a lock poisoned by a panicking op still holds usable sums.
    fn stats(&self) -> std::sync::MutexGuard<'_, BackendStats> {
        self.stats
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn record(&self, class: String, bytes_read: u64, seconds: f64) {
        let mut stats = self.stats();
        stats.dispatches += 1;
        match stats.ops.iter_mut().find(|op| op.class == class) {
            Some(op) => {
                op.calls += 1;
                op.seconds += seconds;
                op.bytes_read += bytes_read;
            }
            None => stats.ops.push(OpTiming {
                class,
                calls: 1,
                seconds,
                bytes_read,
            }),
        }
    }
}

impl CpuBackend {
    /// A backend computing on `threads` worker threads (0: one per core).
    pub fn new(threads: usize) -> Result<CpuBackend, rayon::ThreadPoolBuildError> {
        CpuBackend::with_options(threads, CpuMode::Exact)
    }

    /// A backend on `threads` worker threads (0: one per core) computing matmuls in `mode`.
    pub fn with_options(
        threads: usize,
        mode: CpuMode,
    ) -> Result<CpuBackend, rayon::ThreadPoolBuildError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("qwen35-cpu-{i}"))
            .build()?;
        Ok(CpuBackend {
            pool,
            mode,
            profiler: Profiler::default(),
            allocation_failure: Default::default(),
        })
    }

    /// Runs one op; with profiling on, its time and `bytes_read` are added to `class()`.
    fn op<T>(&self, class: impl FnOnce() -> String, bytes_read: u64, run: impl FnOnce() -> T) -> T {
        if !self.profiler.on.load(Ordering::Relaxed) {
            return run();
        }
        let started = Instant::now();
        let out = run();
        let seconds = started.elapsed().as_secs_f64();
        self.profiler.record(class(), bytes_read, seconds);
        out
    }
}

/// Bytes an attention call reads from one cache: its first `seen` rows.
fn cache_bytes_read(cache: &CpuTensor, seen: usize) -> u64 {
    (seen.min(cache.rows) * cache.cols * std::mem::size_of::<f32>()) as u64
}

/// Bytes of f32 data in `tensors`.
fn f32_bytes(tensors: &[&CpuTensor]) -> u64 {
    tensors
        .iter()
        .map(|t| (t.data.len() * std::mem::size_of::<f32>()) as u64)
        .sum()
}

/// A row-major f32 matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuTensor {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

impl CpuTensor {
    fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// A weight matrix read in place from the mapped GGUF file.
pub struct CpuWeight {
    file: Arc<GgufFile>,
    info: TensorInfo,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
}

impl CpuWeight {
    fn row(&self, op: &'static str, r: usize) -> Result<&[u8], BackendError> {
        self.file
            .tensor_data(&self.info)
            .get(r * self.row_bytes..(r + 1) * self.row_bytes)
            .ok_or_else(|| BackendError::Shape {
                op,
                detail: format!("weight {} has no row {r}", self.info.name),
            })
    }

    fn quant_error(&self, op: &'static str) -> impl Fn(quant::QuantError) -> BackendError + '_ {
        move |source| BackendError::Quant {
            op,
            tensor: self.info.name.clone(),
            source,
        }
    }
}

/// Weight rows dequantized together in prefill matmuls.
const ROW_TILE: usize = 8;

/// Tokens whose activations a prefill matmul keeps in L1 while it runs a tile of weight rows
/// against them.
const TOKEN_GROUP: usize = 8;

/// `from` is [rows][n], `to` becomes [n][rows]. A task takes a few tokens, so each pass over
/// `from` reads runs of neighbouring values and writes a few streams.
fn transpose(from: &[f32], n: usize, to: &mut [f32], rows: usize) {
    const TOKENS_PER_TASK: usize = 8;
    to.par_chunks_mut(rows * TOKENS_PER_TASK)
        .enumerate()
        .for_each(|(i, out)| {
            let first = i * TOKENS_PER_TASK;
            for (r, ys) in from.chunks_exact(n).enumerate() {
                let tokens = ys.iter().skip(first);
                for (out, &y) in out.chunks_exact_mut(rows).zip(tokens) {
                    if let Some(slot) = out.get_mut(r) {
                        *slot = y;
                    }
                }
            }
        });
}

/// Decode: the fused dot never materializes a weight row.
fn matvec(
    w: &CpuWeight,
    x: &[f32],
    out: &mut [f32],
    rows_per_task: usize,
) -> Result<(), BackendError> {
    let op = "matmul";
    out.par_chunks_mut(rows_per_task)
        .enumerate()
        .try_for_each(|(i, ys)| {
            for (k, y) in ys.iter_mut().enumerate() {
                *y = quant::dot_row(w.ty, w.row(op, i * rows_per_task + k)?, x)
                    .map_err(w.quant_error(op))?;
            }
            Ok(())
        })
}

/// Fast mode: each task runs a slice of weight rows against every token. `out` is
/// [weight row][token].
fn matmul_quantized(
    w: &CpuWeight,
    tokens: &[quant::QuantizedActivations],
    out: &mut [f32],
    rows_per_task: usize,
) -> Result<(), BackendError> {
    let n = tokens.len();
    let weights = w.file.tensor_data(&w.info);
    out.par_chunks_mut(rows_per_task * n)
        .zip(weights.par_chunks(rows_per_task * w.row_bytes))
        .try_for_each(|(ys, rows)| {
            quant::matmul_quantized(w.ty, rows, tokens, ys).map_err(w.quant_error("matmul"))
        })
}

/// Exact prefill: dequantize a tile of weight rows once, then dot it with every token (each
/// token row is read once per tile, not once per weight row). `out` is [weight row][token].
fn matmul_tiled(w: &CpuWeight, x: &CpuTensor, out: &mut [f32]) -> Result<(), BackendError> {
    let op = "matmul";
    let n = x.rows;
    out.par_chunks_mut(n * ROW_TILE)
        .enumerate()
        .try_for_each_init(
            || vec![0f32; ROW_TILE * w.cols],
            |tile, (i, ys)| {
                let tile = &mut tile[..ys.len() / n * w.cols];
                for (k, row) in tile.chunks_exact_mut(w.cols).enumerate() {
                    quant::dequantize_row(w.ty, w.row(op, i * ROW_TILE + k)?, row)
                        .map_err(w.quant_error(op))?;
                }
                let tokens: Vec<&[f32]> = x.data.chunks_exact(w.cols).collect();
                for (g, group) in tokens.chunks(TOKEN_GROUP).enumerate() {
                    let first = g * TOKEN_GROUP;
                    for (row, ys) in tile.chunks_exact(w.cols).zip(ys.chunks_exact_mut(n)) {
                        let ys = &mut ys[first..first + group.len()];
                        quant::dot_f32_tokens(row, group, ys).map_err(w.quant_error(op))?;
                    }
                }
                Ok(())
            },
        )
}

fn shape_error(op: &'static str, detail: String) -> BackendError {
    BackendError::Shape { op, detail }
}

fn same_dims(op: &'static str, a: &CpuTensor, b: &CpuTensor) -> Result<(), BackendError> {
    checks::same_dims((a.rows, a.cols), (b.rows, b.cols)).map_err(|d| shape_error(op, d))
}

fn whole_groups(op: &'static str, x: &CpuTensor, group: usize) -> Result<(), BackendError> {
    checks::whole_groups(x.cols, group).map_err(|d| shape_error(op, d))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent partial sums vectorize and keep the rounding error of long rows small.
    let mut acc = [0f32; 8];
    let (a8, a_tail) = a.split_at(a.len() - a.len() % 8);
    let (b8, b_tail) = b.split_at(a8.len().min(b.len()));
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// One token of one Gated DeltaNet head.
struct DeltaStep<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    decay: f32,
    beta: f32,
}

/// Advances a head's state `s` ([k_dim][v_dim]) by one token and writes its output to `o`
/// (zeros on entry); `delta` is scratch of `v_dim` values.
#[inline(always)]
fn delta_step_body(step: &DeltaStep, s: &mut [f32], o: &mut [f32], delta: &mut [f32]) {
    let v_dim = o.len();
    // Decay S, and read what it recalls for k: r = Sᵀk (kept in `delta`).
    delta.fill(0.0);
    for (s_i, &k_i) in s.chunks_exact_mut(v_dim).zip(step.k) {
        for (s, r) in s_i.iter_mut().zip(delta.iter_mut()) {
            *s *= step.decay;
            *r += *s * k_i;
        }
    }
    for (d, &vj) in delta.iter_mut().zip(step.v) {
        *d = step.beta * (vj - *d);
    }
    // Write k ⊗ δ into S, and read o = Sᵀq.
    for ((s_i, &k_i), &q_i) in s.chunks_exact_mut(v_dim).zip(step.k).zip(step.q) {
        for ((s, &d), o) in s_i.iter_mut().zip(&*delta).zip(o.iter_mut()) {
            *s += k_i * d;
            *o += *s * q_i;
        }
    }
}

/// [`delta_step_body`] on the widest vectors this CPU has. Every build runs the same
/// element-wise Rust (the compiler neither fuses nor reorders float operations), so results
/// are bit-identical.
fn delta_step(step: &DeltaStep, s: &mut [f32], o: &mut [f32], delta: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if wide_vectors::avx512() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { wide_vectors::delta_step_avx512(step, s, o, delta) };
        }
        if wide_vectors::avx2() {
            // SAFETY: as above.
            return unsafe { wide_vectors::delta_step_avx2(step, s, o, delta) };
        }
    }
    delta_step_body(step, s, o, delta)
}

#[cfg(target_arch = "x86_64")]
mod wide_vectors {
    use super::{delta_step_body, DeltaStep};

    pub(super) fn avx512() -> bool {
        static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| std::arch::is_x86_feature_detected!("avx512f"))
    }

    pub(super) fn avx2() -> bool {
        static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn delta_step_avx512(
        step: &DeltaStep,
        s: &mut [f32],
        o: &mut [f32],
        delta: &mut [f32],
    ) {
        delta_step_body(step, s, o, delta)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn delta_step_avx2(
        step: &DeltaStep,
        s: &mut [f32],
        o: &mut [f32],
        delta: &mut [f32],
    ) {
        delta_step_body(step, s, o, delta)
    }
}

/// The exp of the SiLU and sigmoid gates: the C library's in the exact mode, which every
/// test's reference runs; in the fast mode a branch-free polynomial, which the loops over a
/// row vectorize (the library's exp is a call per value: 0.8B prefill spent ~15% of its time
/// in it).
trait Exp {
    fn exp(x: f32) -> f32;
}

struct LibraryExp;

impl Exp for LibraryExp {
    #[inline(always)]
    fn exp(x: f32) -> f32 {
        x.exp()
    }
}

struct PolynomialExp;

impl Exp for PolynomialExp {
    /// e^x = 2^n · e^r with n = round(x·log2 e) and |r| ≤ ln2/2, e^r by its Taylor series to r⁶
    /// (relative error below 3·10⁻⁷, about 2 ulp, against f64; `tests` below). Inputs are
    /// clamped to where 2^n is a normal f32, so the result stays finite.
    #[inline(always)]
    fn exp(x: f32) -> f32 {
        // Adding 1.5·2²³ rounds x·log2 e to an integer in the low mantissa bits, with no
        // conversion instruction (none vectorizes on baseline x86-64).
        const SHIFT: f32 = 12_582_912.0;
        const LN2_HIGH: f32 = 0.693_145_75;
        const LN2_LOW: f32 = 1.428_606_8e-6;
        let x = x.clamp(-87.0, 88.0);
        let shifted = x * std::f32::consts::LOG2_E + SHIFT;
        let n = shifted - SHIFT;
        let r = (x - n * LN2_HIGH) - n * LN2_LOW;
        let p = 1.0
            + r * (1.0
                + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r / 720.0)))));
        let n_bits = shifted.to_bits().wrapping_sub(SHIFT.to_bits());
        p * f32::from_bits(n_bits.wrapping_add(127) << 23)
    }
}

#[inline(always)]
fn silu<E: Exp>(x: f32) -> f32 {
    x / (1.0 + E::exp(-x))
}

#[inline(always)]
fn sigmoid<E: Exp>(x: f32) -> f32 {
    1.0 / (1.0 + E::exp(-x))
}

fn swiglu<E: Exp>(gate: f32, up: f32) -> f32 {
    silu::<E>(gate) * up
}

fn sigmoid_mul<E: Exp>(x: f32, gate: f32) -> f32 {
    x * sigmoid::<E>(gate)
}

fn silu_row<E: Exp>(row: &mut [f32]) {
    row.iter_mut().for_each(|y| *y = silu::<E>(*y));
}

/// `out ⊙ silu(z)`.
fn gate_row<E: Exp>(out: &mut [f32], z: &[f32]) {
    for (o, &zv) in out.iter_mut().zip(z) {
        *o *= silu::<E>(zv);
    }
}

/// softplus with torch's and ggml's linear cut-over above 20.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// `1 / sqrt(mean(x²) + eps)`, the sum taken in f64.
fn inv_rms(x: &[f32], eps: f32) -> f32 {
    let sum: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    1.0 / ((sum / x.len() as f64) as f32 + eps).sqrt()
}

impl CpuBackend {
    /// Applies `f(x_group, w_group, out_group)` to each group of `w.cols` columns of every row.
    fn grouped(
        &self,
        op: &'static str,
        x: &CpuTensor,
        w: &CpuTensor,
        f: impl Fn(&[f32], usize, &mut [f32]) + Sync,
    ) -> Result<CpuTensor, BackendError> {
        if w.rows != 1 {
            return Err(shape_error(
                op,
                format!("weight has {} rows, not 1", w.rows),
            ));
        }
        whole_groups(op, x, w.cols)?;
        let mut out = vec![0f32; x.data.len()];
        self.pool.install(|| {
            x.data
                .par_chunks_exact(w.cols)
                .zip(out.par_chunks_exact_mut(w.cols))
                .enumerate()
                .with_min_len(ELEMENTWISE_TASK.div_ceil(w.cols))
                .for_each(|(i, (xg, og))| f(xg, i, og));
        });
        Ok(CpuTensor {
            rows: x.rows,
            cols: x.cols,
            data: out,
        })
    }

    fn zip_map(
        &self,
        op: &'static str,
        a: &CpuTensor,
        b: &CpuTensor,
        f: impl Fn(f32, f32) -> f32 + Sync,
    ) -> Result<CpuTensor, BackendError> {
        same_dims(op, a, b)?;
        let mut data = vec![0f32; a.data.len()];
        self.pool.install(|| {
            data.par_chunks_mut(ELEMENTWISE_TASK)
                .zip(a.data.par_chunks(ELEMENTWISE_TASK))
                .zip(b.data.par_chunks(ELEMENTWISE_TASK))
                .for_each(|((out, a), b)| {
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                        *o = f(x, y);
                    }
                })
        });
        Ok(CpuTensor {
            rows: a.rows,
            cols: a.cols,
            data,
        })
    }
}

/// `len` zeros, or None when the allocator refuses. The memory comes zeroed from the allocator
/// and is not written here, so (as with `vec![0.0; len]`) a KV cache costs resident memory only
/// as it fills.
fn zeroed(len: usize) -> Option<Vec<f32>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<f32>(len).ok()?;
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: allocated by the global allocator with the layout of `len` f32s (the one a Vec of
    // capacity `len` frees with), and all-zero bytes are the f32 0.0.
    Some(unsafe { Vec::from_raw_parts(ptr.cast::<f32>(), len, len) })
}

impl Backend for CpuBackend {
    type Tensor = CpuTensor;
    type Weight = CpuWeight;

    fn upload_weight(
        &self,
        file: &Arc<GgufFile>,
        info: &TensorInfo,
    ) -> Result<CpuWeight, BackendError> {
        let op = "upload_weight";
        let cols = info.dims.first().copied().unwrap_or(0) as usize;
        let rows = info.dims.iter().skip(1).product::<u64>() as usize;
        let row_bytes = quant::row_bytes(info.ggml_type, cols as u64)
            .ok_or_else(|| shape_error(op, format!("{}: bad row length {cols}", info.name)))?
            as usize;
        let stored = file.tensor_data(info).len();
        if rows.checked_mul(row_bytes) != Some(stored) {
            return Err(shape_error(
                op,
                format!(
                    "{}: {rows} rows of {row_bytes} bytes but {stored} stored",
                    info.name
                ),
            ));
        }
        Ok(CpuWeight {
            file: Arc::clone(file),
            info: info.clone(),
            ty: info.ggml_type,
            rows,
            cols,
            row_bytes,
        })
    }

    fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<CpuTensor, BackendError> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(shape_error(
                "upload",
                format!("{rows}×{cols} from {} values", data.len()),
            ));
        }
        Ok(CpuTensor {
            rows,
            cols,
            data: data.to_vec(),
        })
    }

    /// A size the allocator refuses (a huge context) gives an empty tensor and is reported by
    /// `status`, instead of aborting the process.
    fn zeros(&self, rows: usize, cols: usize) -> CpuTensor {
        let len = rows.saturating_mul(cols);
        let data = zeroed(len).unwrap_or_else(|| {
            let failure = format!(
                "out of memory: a {rows}×{cols} f32 tensor needs {} bytes",
                len as u128 * 4
            );
            if let Ok(mut first) = self.allocation_failure.lock() {
                first.get_or_insert(failure);
            }
            Vec::new()
        });
        CpuTensor { rows, cols, data }
    }

    /// f32: the CPU is the exact reference.
    fn kv_cache(&self, rows: usize, cols: usize) -> CpuTensor {
        self.zeros(rows, cols)
    }

    fn dims(&self, x: &CpuTensor) -> (usize, usize) {
        (x.rows, x.cols)
    }

    fn read_rows(&self, x: &CpuTensor, start: usize, count: usize) -> Vec<f32> {
        let start = start.min(x.rows);
        let end = start.saturating_add(count).min(x.rows);
        x.data[start * x.cols..end * x.cols].to_vec()
    }

    fn write_rows(
        &self,
        x: &mut CpuTensor,
        start: usize,
        data: &[f32],
    ) -> Result<(), BackendError> {
        let from = start.saturating_mul(x.cols);
        let fits =
            x.cols > 0 && data.len().is_multiple_of(x.cols) && from + data.len() <= x.data.len();
        if !fits {
            return Err(shape_error(
                "write_rows",
                format!(
                    "{} values at row {start} of a {}×{} tensor",
                    data.len(),
                    x.rows,
                    x.cols
                ),
            ));
        }
        x.data[from..from + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn embed(&self, table: &CpuWeight, tokens: &[u32]) -> Result<CpuTensor, BackendError> {
        self.op(
            || "embed".into(),
            tokens.len() as u64 * table.row_bytes as u64,
            || {
                let mut data = vec![0f32; tokens.len() * table.cols];
                for (&token, out) in tokens.iter().zip(data.chunks_exact_mut(table.cols)) {
                    if token as usize >= table.rows {
                        return Err(BackendError::TokenOutOfRange {
                            token,
                            vocab: table.rows,
                        });
                    }
                    let row = table.row("embed", token as usize)?;
                    quant::dequantize_row(table.ty, row, out)
                        .map_err(table.quant_error("embed"))?;
                }
                Ok(CpuTensor {
                    rows: tokens.len(),
                    cols: table.cols,
                    data,
                })
            },
        )
    }

    fn matmul(&self, x: &CpuTensor, w: &CpuWeight) -> Result<CpuTensor, BackendError> {
        self.op(
            || {
                super::weight_profile_class(&w.info.name)
                    .map_or_else(|| format!("matmul {}", w.ty.name()), String::from)
            },
            (w.rows * w.row_bytes) as u64 + f32_bytes(&[x]),
            || {
                let op = "matmul";
                if x.cols != w.cols {
                    return Err(shape_error(
                        op,
                        format!("{} columns against {} of {}", x.cols, w.cols, w.info.name),
                    ));
                }
                let n = x.rows;
                // One row of results per weight row ([out, n]); transposed to [n, out] at the end.
                let mut by_row = vec![0f32; w.rows * n];
                let fast = self.mode == CpuMode::Fast && quant::has_quantized_dot(w.ty);
                let quantized = if fast {
                    self.pool.install(|| {
                        x.data
                            .par_chunks(x.cols.max(1))
                            .map(quant::QuantizedActivations::new)
                            .collect::<Option<Vec<_>>>()
                    })
                } else {
                    None
                };
                let rows_per_task = (TASK_BYTES / w.row_bytes.max(1)).max(1);
                self.pool.install(|| match &quantized {
                    Some(tokens) => matmul_quantized(w, tokens, &mut by_row, rows_per_task),
                    None if n == 1 => matvec(w, &x.data, &mut by_row, rows_per_task),
                    None => matmul_tiled(w, x, &mut by_row),
                })?;
                let data = if n == 1 {
                    by_row
                } else {
                    let mut data = vec![0f32; n * w.rows];
                    self.pool
                        .install(|| transpose(&by_row, n, &mut data, w.rows));
                    data
                };
                Ok(CpuTensor {
                    rows: n,
                    cols: w.rows,
                    data,
                })
            },
        )
    }

    fn rows(&self, x: &CpuTensor, start: usize, count: usize) -> Result<CpuTensor, BackendError> {
        self.op(
            || "rows".into(),
            (count.min(x.rows) * x.cols * std::mem::size_of::<f32>()) as u64,
            || {
                if start.checked_add(count).is_none_or(|end| end > x.rows) {
                    return Err(shape_error(
                        "rows",
                        format!("rows {start}..+{count} of {}", x.rows),
                    ));
                }
                Ok(CpuTensor {
                    rows: count,
                    cols: x.cols,
                    data: self.read_rows(x, start, count),
                })
            },
        )
    }

    fn slice_cols(
        &self,
        x: &CpuTensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<CpuTensor, BackendError> {
        self.op(
            || "slice_cols".into(),
            f32_bytes(&[x]),
            || {
                let op = "slice_cols";
                whole_groups(op, x, group)?;
                if offset.checked_add(width).is_none_or(|end| end > group) {
                    return Err(shape_error(
                        op,
                        format!("columns {offset}..+{width} of groups of {group}"),
                    ));
                }
                let mut data = vec![0f32; x.data.len() / group * width];
                self.pool.install(|| {
                    data.par_chunks_exact_mut(width)
                        .zip(x.data.par_chunks_exact(group))
                        .with_min_len(ELEMENTWISE_TASK.div_ceil(group))
                        .for_each(|(out, g)| out.copy_from_slice(&g[offset..offset + width]))
                });
                Ok(CpuTensor {
                    rows: x.rows,
                    cols: x.cols / group * width,
                    data,
                })
            },
        )
    }

    fn rms_norm(&self, x: &CpuTensor, w: &CpuTensor, eps: f32) -> Result<CpuTensor, BackendError> {
        self.op(
            || "rms_norm".into(),
            f32_bytes(&[x, w]),
            || {
                self.grouped("rms_norm", x, w, |xg, _, out| {
                    let s = inv_rms(xg, eps);
                    for ((o, &v), &wv) in out.iter_mut().zip(xg).zip(&w.data) {
                        *o = v * s * wv;
                    }
                })
            },
        )
    }

    fn l2_norm(
        &self,
        x: &CpuTensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<CpuTensor, BackendError> {
        self.op(
            || "l2_norm".into(),
            f32_bytes(&[x]),
            || {
                whole_groups("l2_norm", x, group)?;
                let mut data = x.data.clone();
                self.pool.install(|| {
                    data.par_chunks_exact_mut(group)
                        .with_min_len(ELEMENTWISE_TASK.div_ceil(group))
                        .for_each(|g| {
                            let sum: f64 = g.iter().map(|&v| v as f64 * v as f64).sum();
                            let s = scale / (sum as f32 + eps).sqrt();
                            g.iter_mut().for_each(|v| *v *= s);
                        })
                });
                Ok(CpuTensor { data, ..*x })
            },
        )
    }

    fn add(&self, x: &mut CpuTensor, y: &CpuTensor) -> Result<(), BackendError> {
        self.op(
            || "add".into(),
            f32_bytes(&[&*x, y]),
            || {
                same_dims("add", x, y)?;
                self.pool.install(|| {
                    x.data
                        .par_chunks_mut(ELEMENTWISE_TASK)
                        .zip(y.data.par_chunks(ELEMENTWISE_TASK))
                        .for_each(|(x, y)| x.iter_mut().zip(y).for_each(|(a, b)| *a += b))
                });
                Ok(())
            },
        )
    }

    fn argmax(&self, x: &CpuTensor) -> Result<CpuTensor, BackendError> {
        self.op(
            || "sampling".into(),
            f32_bytes(&[x]),
            || {
                let best: Vec<f32> = x
                    .data
                    .chunks_exact(x.cols.max(1))
                    .map(|row| crate::sample::argmax(row) as f32)
                    .collect();
                Ok(CpuTensor {
                    rows: x.rows,
                    cols: 1,
                    data: best,
                })
            },
        )
    }

    fn swiglu(&self, gate: &CpuTensor, up: &CpuTensor) -> Result<CpuTensor, BackendError> {
        self.op(
            || "swiglu".into(),
            f32_bytes(&[gate, up]),
            || match self.mode {
                CpuMode::Exact => self.zip_map("swiglu", gate, up, swiglu::<LibraryExp>),
                CpuMode::Fast => self.zip_map("swiglu", gate, up, swiglu::<PolynomialExp>),
            },
        )
    }

    fn sigmoid_mul(&self, x: &CpuTensor, gate: &CpuTensor) -> Result<CpuTensor, BackendError> {
        self.op(
            || "sigmoid_mul".into(),
            f32_bytes(&[x, gate]),
            || match self.mode {
                CpuMode::Exact => self.zip_map("sigmoid_mul", x, gate, sigmoid_mul::<LibraryExp>),
                CpuMode::Fast => self.zip_map("sigmoid_mul", x, gate, sigmoid_mul::<PolynomialExp>),
            },
        )
    }

    fn rope(
        &self,
        x: &CpuTensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<CpuTensor, BackendError> {
        self.op(
            || "rope".into(),
            f32_bytes(&[x]),
            || {
                whole_groups("rope", x, head_dim)?;
                if rot_dims > head_dim || !rot_dims.is_multiple_of(2) {
                    return Err(shape_error(
                        "rope",
                        format!("{rot_dims} rotary dims in heads of {head_dim}"),
                    ));
                }
                let half = rot_dims / 2;
                // Inverse frequencies as HF computes them: base^(−2i/rot) in f32.
                let inv_freq: Vec<f32> = (0..half)
                    .map(|i| 1.0 / freq_base.powf((2 * i) as f32 / rot_dims as f32))
                    .collect();
                let mut data = x.data.clone();
                for (t, row) in data.chunks_exact_mut(x.cols).enumerate() {
                    let pos = (pos0 + t) as f32;
                    let angles: Vec<(f32, f32)> =
                        inv_freq.iter().map(|f| (pos * f).sin_cos()).collect();
                    for head in row.chunks_exact_mut(head_dim) {
                        let (lo, hi) = head[..rot_dims].split_at_mut(half);
                        for ((a, b), &(sin, cos)) in lo.iter_mut().zip(hi.iter_mut()).zip(&angles) {
                            let (x0, x1) = (*a, *b);
                            *a = x0 * cos - x1 * sin;
                            *b = x1 * cos + x0 * sin;
                        }
                    }
                }
                Ok(CpuTensor { data, ..*x })
            },
        )
    }

    fn attention(
        &self,
        q: &CpuTensor,
        k: &CpuTensor,
        v: &CpuTensor,
        cache: &mut KvCache<'_, CpuTensor>,
        shape: AttentionShape,
    ) -> Result<CpuTensor, BackendError> {
        let (k_cache, v_cache, pos0) = (&mut *cache.k, &mut *cache.v, cache.pos0);
        self.op(
            || "attention".into(),
            f32_bytes(&[q, k, v]) + 2 * cache_bytes_read(k_cache, pos0 + q.rows),
            || {
                let op = "attention";
                let AttentionShape {
                    n_head,
                    n_kv_head,
                    head_dim,
                } = shape;
                checks::attention(
                    (q.rows, q.cols),
                    (k.rows, k.cols),
                    (v.rows, v.cols),
                    (k_cache.rows, k_cache.cols),
                    (v_cache.rows, v_cache.cols),
                    pos0,
                    shape,
                )
                .map_err(|d| shape_error(op, d))?;
                self.write_rows(k_cache, pos0, &k.data)?;
                self.write_rows(v_cache, pos0, &v.data)?;
                let group = n_head / n_kv_head;
                let scale = shape.scale();
                let (k_cache, v_cache) = (&*k_cache, &*v_cache);
                let mut out = vec![0f32; q.data.len()];
                self.pool.install(|| {
                    out.par_chunks_mut(head_dim).enumerate().for_each(|(i, o)| {
                        let (t, h) = (i / n_head, i % n_head);
                        let qh = &q.row(t)[h * head_dim..(h + 1) * head_dim];
                        let kv_at = (h / group) * head_dim..(h / group + 1) * head_dim;
                        let seen = pos0 + t + 1;
                        let mut weights: Vec<f32> = (0..seen)
                            .map(|j| dot(qh, &k_cache.row(j)[kv_at.clone()]) * scale)
                            .collect();
                        let max = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let mut total = 0f32;
                        for w in &mut weights {
                            *w = (*w - max).exp();
                            total += *w;
                        }
                        for (j, w) in weights.iter().enumerate() {
                            let vj = &v_cache.row(j)[kv_at.clone()];
                            for (o, &vv) in o.iter_mut().zip(vj) {
                                *o += w / total * vv;
                            }
                        }
                    });
                });
                Ok(CpuTensor {
                    rows: q.rows,
                    cols: q.cols,
                    data: out,
                })
            },
        )
    }

    fn conv1d_silu(
        &self,
        x: &CpuTensor,
        w: &CpuTensor,
        state: &mut CpuTensor,
    ) -> Result<CpuTensor, BackendError> {
        self.op(
            || "conv1d_silu".into(),
            f32_bytes(&[x, w, &*state]),
            || {
                let taps = w.cols;
                let channels = x.cols;
                if taps == 0
                    || w.rows != channels
                    || (state.rows, state.cols) != (taps - 1, channels)
                {
                    return Err(shape_error(
                        "conv1d_silu",
                        format!(
                            "x {}×{channels}, w {}×{taps}, state {}×{}",
                            x.rows, w.rows, state.rows, state.cols
                        ),
                    ));
                }
                // The raw inputs in time order: the carried rows, then this call's.
                let history = [state.data.as_slice(), x.data.as_slice()].concat();
                // Tap-major weights, so each step runs along the channels of one input row.
                let mut by_tap = vec![0f32; taps * channels];
                for (c, taps_c) in w.data.chunks_exact(taps).enumerate() {
                    for (k, &tap) in taps_c.iter().enumerate() {
                        by_tap[k * channels + c] = tap;
                    }
                }
                // Chosen once: the row loop inside each vectorizes.
                let silu_row: fn(&mut [f32]) = match self.mode {
                    CpuMode::Exact => silu_row::<LibraryExp>,
                    CpuMode::Fast => silu_row::<PolynomialExp>,
                };
                let mut out = vec![0f32; x.data.len()];
                self.pool.install(|| {
                    out.par_chunks_mut(channels)
                        .enumerate()
                        .for_each(|(t, row)| {
                            // −0.0 and taps in order: what `Iterator::sum` over the taps gives,
                            // so the results do not depend on the loop order.
                            row.fill(-0.0);
                            let inputs = history[t * channels..].chunks_exact(channels);
                            for (tap, input) in by_tap.chunks_exact(channels).zip(inputs) {
                                for ((y, &w), &v) in row.iter_mut().zip(tap).zip(input) {
                                    *y += w * v;
                                }
                            }
                            silu_row(row);
                        })
                });
                state.data.copy_from_slice(&history[x.rows * channels..]);
                Ok(CpuTensor {
                    rows: x.rows,
                    cols: channels,
                    data: out,
                })
            },
        )
    }

    fn delta_net_gates(
        &self,
        alpha: &CpuTensor,
        beta: &CpuTensor,
        ssm_a: &CpuTensor,
        dt_bias: &CpuTensor,
    ) -> Result<(CpuTensor, CpuTensor), BackendError> {
        self.op(
            || "delta_net_gates".into(),
            f32_bytes(&[alpha, beta, ssm_a, dt_bias]),
            || {
                let op = "delta_net_gates";
                same_dims(op, alpha, beta)?;
                let g = self.grouped(op, alpha, ssm_a, |a, _, out| {
                    for (((o, &a), &decay), &bias) in
                        out.iter_mut().zip(a).zip(&ssm_a.data).zip(&dt_bias.data)
                    {
                        *o = decay * softplus(a + bias);
                    }
                })?;
                same_dims(op, ssm_a, dt_bias)?;
                let beta = CpuTensor {
                    data: beta
                        .data
                        .iter()
                        .map(|&b| sigmoid::<LibraryExp>(b))
                        .collect(),
                    ..*beta
                };
                Ok((g, beta))
            },
        )
    }

    fn delta_rule(
        &self,
        op: &DeltaRule<'_, CpuTensor>,
        state: &mut CpuTensor,
    ) -> Result<CpuTensor, BackendError> {
        let (Qkv { q, k, v }, g, beta, shape) = (op.qkv, op.g, op.beta, op.shape);
        self.op(
            || "delta_rule".into(),
            f32_bytes(&[q, k, v, g, beta, &*state]),
            || {
                let (k_dim, v_dim) = (shape.k_dim, shape.v_dim);
                let n = q.rows;
                checks::delta_rule(op.qkv, [g, beta], state, shape, |t| (t.rows, t.cols))
                    .map_err(|d| shape_error("delta_rule", d))?;
                let per_head: Vec<Vec<f32>> = self.pool.install(|| {
                    state
                        .data
                        .par_chunks_mut(k_dim * v_dim)
                        .enumerate()
                        .map(|(h, s)| {
                            let kh = (h % shape.n_k_head) * k_dim..(h % shape.n_k_head + 1) * k_dim;
                            let mut o = vec![0f32; n * v_dim];
                            let mut delta = vec![0f32; v_dim];
                            for (t, o_t) in o.chunks_exact_mut(v_dim).enumerate() {
                                let step = DeltaStep {
                                    q: &q.row(t)[kh.clone()],
                                    k: &k.row(t)[kh.clone()],
                                    v: &v.row(t)[h * v_dim..(h + 1) * v_dim],
                                    decay: g.row(t)[h].exp(),
                                    beta: beta.row(t)[h],
                                };
                                delta_step(&step, s, o_t, &mut delta);
                            }
                            o
                        })
                        .collect()
                });
                let cols = shape.n_v_head * v_dim;
                let mut data = vec![0f32; n * cols];
                for (h, o) in per_head.iter().enumerate() {
                    for (t, o_t) in o.chunks_exact(v_dim).enumerate() {
                        data[t * cols + h * v_dim..t * cols + (h + 1) * v_dim].copy_from_slice(o_t);
                    }
                }
                Ok(CpuTensor {
                    rows: n,
                    cols,
                    data,
                })
            },
        )
    }

    // The reference runs the model's steps op by op: it has no fused forms.

    fn gated_attention(
        &self,
        _: &GatedAttention<'_, CpuTensor>,
        _: &mut KvCache<'_, CpuTensor>,
    ) -> Result<Option<CpuTensor>, BackendError> {
        Ok(None)
    }

    fn conv_qkv_norm(
        &self,
        _: &ConvQkvNorm<'_, CpuTensor>,
        _: &mut CpuTensor,
    ) -> Result<Option<Qkv<CpuTensor>>, BackendError> {
        Ok(None)
    }

    fn gated_delta_rule(
        &self,
        _: &GatedDeltaRule<'_, CpuTensor>,
        _: &mut CpuTensor,
    ) -> Result<Option<CpuTensor>, BackendError> {
        Ok(None)
    }

    fn gated_rms_norm(
        &self,
        x: &CpuTensor,
        z: &CpuTensor,
        w: &CpuTensor,
        eps: f32,
    ) -> Result<CpuTensor, BackendError> {
        self.op(
            || "gated_rms_norm".into(),
            f32_bytes(&[x, z, w]),
            || {
                same_dims("gated_rms_norm", x, z)?;
                // Chosen once: the row loop inside each vectorizes.
                let gate: fn(&mut [f32], &[f32]) = match self.mode {
                    CpuMode::Exact => gate_row::<LibraryExp>,
                    CpuMode::Fast => gate_row::<PolynomialExp>,
                };
                self.grouped("gated_rms_norm", x, w, |xg, i, out| {
                    let s = inv_rms(xg, eps);
                    for ((o, &v), &wv) in out.iter_mut().zip(xg).zip(&w.data) {
                        *o = v * s * wv;
                    }
                    gate(out, &z.data[i * w.cols..(i + 1) * w.cols])
                })
            },
        )
    }

    fn status(&self) -> Result<(), BackendError> {
        match self.allocation_failure.lock() {
            Ok(first) => first
                .clone()
                .map_or(Ok(()), |e| Err(BackendError::Device(e))),
            Err(_) => Err(BackendError::Device("allocation record poisoned".into())),
        }
    }

    fn sample(
        &self,
        logits: &mut CpuTensor,
        recent: &mut CpuTensor,
        slot: usize,
        draw: &Draw,
    ) -> Result<CpuTensor, BackendError> {
        sample_on_host(self, logits, recent, slot, draw)
    }

    /// The CPU computes each op at once: there is nothing to wait for.
    fn synchronize(&self) {}

    fn start_read(&self, x: &CpuTensor) -> PendingRead {
        PendingRead::ready(self.read_rows(x, 0, x.rows))
    }

    fn rms_norm_matmuls<const N: usize>(
        &self,
        x: &CpuTensor,
        norm: &CpuTensor,
        eps: f32,
        ws: [&CpuWeight; N],
    ) -> Result<[CpuTensor; N], BackendError> {
        rms_norm_matmul_each(self, x, norm, eps, ws)
    }

    fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.pool.install(work)
    }

    fn set_profiling(&self, on: bool) {
        self.profiler.on.store(on, Ordering::Relaxed);
    }

    /// Ops run and their times while profiling was on (the CPU has no submits); all zero when
    /// it was off, since counting would cost the unprofiled path.
    fn take_stats(&self) -> BackendStats {
        std::mem::take(&mut *self.profiler.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomial_exp_is_within_two_ulp_of_f64_over_the_gate_range() {
        let mut worst = 0f64;
        for i in -870_000..=880_000 {
            let x = i as f32 * 1e-4;
            let want = (x as f64).exp();
            let got = PolynomialExp::exp(x) as f64;
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        // Past the clamp: finite, and silu and sigmoid keep their limits.
        assert!(PolynomialExp::exp(200.0).is_finite());
        assert!(PolynomialExp::exp(-200.0) < 1e-37);
        assert!(silu::<PolynomialExp>(-200.0).abs() < 1e-30);
        assert_eq!(sigmoid::<PolynomialExp>(200.0), 1.0);
        assert_eq!(silu::<PolynomialExp>(0.0), 0.0);
    }
}
