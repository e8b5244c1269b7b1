//! `qwen35 bench gemv`: one matrix-vector product through the [`Backend`] op set, timed three
//! ways, to separate per-call overhead from bandwidth:
//! - one GEMV per call, each waited for (matmul + read_rows);
//! - N GEMVs back to back, waited for once (on a GPU: N dispatches in one submit);
//! - a 256×256 GEMV per call, whose time is almost all overhead: the floor.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::backend::{Backend, BackendError};
use crate::gguf::{GgufError, GgufFile, GgufWriter};
use crate::quant::{self, GgmlType, QuantError};

#[derive(Clone, Debug)]
pub struct GemvOptions {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// GEMVs per timing.
    pub repeats: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct GemvReport {
    pub backend: String,
    pub ty: String,
    pub rows: usize,
    pub cols: usize,
    /// Bytes of the encoded matrix.
    pub weight_bytes: u64,
    pub one_per_call: GemvTiming,
    pub back_to_back: GemvTiming,
    /// The 256×256 GEMV, one per call.
    pub floor: GemvTiming,
}

#[derive(Clone, Debug, Serialize)]
pub struct GemvTiming {
    pub gemvs: usize,
    pub us_per_gemv: f64,
    /// Matrix and input vector bytes per GEMV / time per GEMV.
    pub gbps: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum MatrixBenchError {
    #[error("a {rows}×{cols} {ty} matrix: rows must be whole {block}-element blocks", ty = .ty.name())]
    Shape {
        ty: GgmlType,
        rows: usize,
        cols: usize,
        block: usize,
    },
    #[error("tensor {0} is missing from the test GGUF")]
    Missing(&'static str),
    #[error("encoding the test matrix: {0}")]
    Quant(#[from] QuantError),
    #[error("building the test GGUF: {0}")]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Side of the square matrix that measures the overhead floor.
const FLOOR: usize = 256;
/// Distinct random rows the test matrices are tiled from (encoding every row would take longer
/// than the benchmark).
const DISTINCT_ROWS: usize = 16;

/// Times `opts`' GEMV on `backend`, named `name` in the report.
pub fn run_gemv<B: Backend>(
    backend: &B,
    name: &str,
    opts: &GemvOptions,
) -> Result<GemvReport, MatrixBenchError> {
    let file = Arc::new(matrices(opts)?);
    let weight = |tensor: &'static str| {
        let info = file
            .tensor(tensor)
            .ok_or(MatrixBenchError::Missing(tensor))?;
        Ok::<_, MatrixBenchError>((backend.upload_weight(&file, info)?, info.n_bytes))
    };
    let (big, weight_bytes) = weight("gemv.weight")?;
    let (small, small_bytes) = weight("floor.weight")?;
    let x = backend.upload(1, opts.cols, &random_values(opts.cols, 1))?;
    let x_floor = backend.upload(1, FLOOR, &random_values(FLOOR, 2))?;
    let n = opts.repeats.max(1);
    let x_bytes = |cols: usize| (cols * std::mem::size_of::<f32>()) as u64;

    let timing = |seconds: f64, gemvs: usize, bytes: u64| GemvTiming {
        gemvs,
        us_per_gemv: seconds * 1e6 / gemvs as f64,
        gbps: bytes as f64 * gemvs as f64 / seconds.max(f64::MIN_POSITIVE) / 1e9,
    };
    let big_bytes = weight_bytes + x_bytes(opts.cols);
    let floor_bytes = small_bytes + x_bytes(FLOOR);
    // Warm-up: pipelines, first-touch of the weights.
    time_products(backend, &x, &big, 1, Waits::EachCall)?;
    time_products(backend, &x_floor, &small, 1, Waits::EachCall)?;
    Ok(GemvReport {
        backend: name.to_string(),
        ty: opts.ty.name(),
        rows: opts.rows,
        cols: opts.cols,
        weight_bytes,
        one_per_call: timing(
            time_products(backend, &x, &big, n, Waits::EachCall)?,
            n,
            big_bytes,
        ),
        back_to_back: timing(
            time_products(backend, &x, &big, n, Waits::Once)?,
            n,
            big_bytes,
        ),
        floor: timing(
            time_products(backend, &x_floor, &small, n, Waits::EachCall)?,
            n,
            floor_bytes,
        ),
    })
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Waits {
    EachCall,
    Once,
}

/// Seconds for `n` products, reading the result back after each or after the last.
pub(super) fn time_products<B: Backend>(
    b: &B,
    x: &B::Tensor,
    w: &B::Weight,
    n: usize,
    waits: Waits,
) -> Result<f64, BackendError> {
    let started = Instant::now();
    // Results stay alive until the final read, so no GPU buffer is recycled mid-flight.
    let mut results = Vec::with_capacity(n);
    for _ in 0..n {
        let y = b.matmul(x, w)?;
        if waits == Waits::EachCall {
            b.read_rows(&y, 0, 1);
        }
        results.push(y);
    }
    if let Some(last) = results.last() {
        b.read_rows(last, 0, 1);
    }
    Ok(started.elapsed().as_secs_f64())
}

/// A GGUF in memory with the measured matrix and the floor matrix, both of `opts.ty`.
fn matrices(opts: &GemvOptions) -> Result<GgufFile, MatrixBenchError> {
    test_weights(
        opts.ty,
        &[
            ("gemv.weight", opts.rows, opts.cols),
            ("floor.weight", FLOOR, FLOOR),
        ],
    )
}

/// A GGUF in memory with a random matrix of `ty` for each `(name, rows, cols)`.
pub(super) fn test_weights(
    ty: GgmlType,
    shapes: &[(&str, usize, usize)],
) -> Result<GgufFile, MatrixBenchError> {
    let block = ty.block_elems();
    if let Some(&(_, rows, cols)) = shapes
        .iter()
        .find(|(_, rows, cols)| *rows == 0 || *cols == 0 || !cols.is_multiple_of(block))
    {
        return Err(MatrixBenchError::Shape {
            ty,
            rows,
            cols,
            block,
        });
    }
    let mut layout = GgufWriter::new();
    for &(name, rows, cols) in shapes {
        layout.add_tensor(name, &[cols as u64, rows as u64], ty)?;
    }
    let mut data = layout.write_header(Vec::new())?;
    for &(name, rows, cols) in shapes {
        let mut distinct = Vec::new();
        for seed in 0..DISTINCT_ROWS {
            quant::quantize_row(ty, &random_values(cols, seed as u64 + 3), &mut distinct)?;
        }
        let row_bytes = distinct.len() / DISTINCT_ROWS;
        let bytes: Vec<u8> = distinct
            .chunks_exact(row_bytes.max(1))
            .cycle()
            .take(rows)
            .flatten()
            .copied()
            .collect();
        data.write_tensor(name, &bytes)?;
    }
    let bytes = data.finish()?;
    Ok(GgufFile::from_bytes(bytes)?)
}

/// `n` values roughly uniform in [-1, 1), the same for the same seed.
pub(super) fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            // xorshift64*: enough for test data whose values do not matter to the speed.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            bits as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}
