//! `qwen35 bench gemm`: the prefill matrix product (P activation rows times a quantized weight)
//! through the [`Backend`] op set, in TFLOP/s by weight shape and P, so a GEMM kernel can be
//! tuned apart from the rest of prefill.

use std::sync::Arc;

use serde::Serialize;

use super::gemv::{random_values, test_weights, time_products, MatrixBenchError, Waits};
use crate::backend::Backend;
use crate::quant::GgmlType;

/// One weight matrix to multiply: `rows` outputs of `cols` inputs, encoded as `ty`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GemmShape {
    #[serde(serialize_with = "type_name")]
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
}

fn type_name<S: serde::Serializer>(ty: &GgmlType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&ty.name())
}

impl GemmShape {
    /// The weights a Qwen3.6-27B Q4_K_M prefill multiplies by (hidden 5120, FFN 17408, 24
    /// query heads of 256 with their gates, 4 KV heads, DeltaNet q/k/v of 10240 and its 6144-wide
    /// gate and output), with Q6_K where that file type puts it (half the ffn_down).
    pub fn qwen36_27b() -> Vec<GemmShape> {
        let q4 = GgmlType::Q4_K;
        [
            (q4, 10240, 5120),
            (q4, 6144, 5120),
            (q4, 12288, 5120),
            (q4, 5120, 6144),
            (q4, 17408, 5120),
            (q4, 5120, 17408),
            (GgmlType::Q6_K, 5120, 17408),
        ]
        .map(|(ty, rows, cols)| GemmShape { ty, rows, cols })
        .to_vec()
    }
}

#[derive(Clone, Debug)]
pub struct GemmOptions {
    pub shapes: Vec<GemmShape>,
    /// Activation rows (prompt tokens) of each product.
    pub rows: Vec<usize>,
    /// Products per timing, waited for once.
    pub repeats: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct GemmReport {
    pub backend: String,
    pub repeats: usize,
    pub results: Vec<GemmResult>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GemmResult {
    pub shape: GemmShape,
    /// Activation rows.
    pub p: usize,
    pub ms_per_gemm: f64,
    /// 2·P·rows·cols per product / its time.
    pub tflops: f64,
}

/// Times each of `opts`' shapes at each P on `backend`, named `name` in the report; `on_result`
/// sees each result as it is measured.
pub fn run_gemm<B: Backend>(
    backend: &B,
    name: &str,
    opts: &GemmOptions,
    on_result: &mut dyn FnMut(&GemmResult),
) -> Result<GemmReport, MatrixBenchError> {
    let mut results = Vec::new();
    for (i, &shape) in opts.shapes.iter().enumerate() {
        let file = Arc::new(test_weights(
            shape.ty,
            &[("gemm.weight", shape.rows, shape.cols)],
        )?);
        let info = file
            .tensor("gemm.weight")
            .ok_or(MatrixBenchError::Missing("gemm.weight"))?;
        let weight = backend.upload_weight(&file, info)?;
        for &p in &opts.rows {
            let x = backend.upload(p, shape.cols, &random_values(p * shape.cols, i as u64))?;
            // Warm-up: the pipeline, first touches of the weight and of the output buffers.
            time_products(backend, &x, &weight, 1, Waits::Once)?;
            let n = opts.repeats.max(1);
            let seconds = time_products(backend, &x, &weight, n, Waits::Once)? / n as f64;
            backend.status()?;
            let flops = 2.0 * (p * shape.rows * shape.cols) as f64;
            let result = GemmResult {
                shape,
                p,
                ms_per_gemm: seconds * 1e3,
                tflops: flops / seconds.max(f64::MIN_POSITIVE) / 1e12,
            };
            on_result(&result);
            results.push(result);
        }
    }
    Ok(GemmReport {
        backend: name.to_string(),
        repeats: opts.repeats,
        results,
    })
}
