//! `qwen35 bench`: prefill and decode speed of each backend on one model, how close decode comes
//! to the memory-bandwidth roofline, where the time goes per op class, and a GEMV
//! microbenchmark and a GEMM one. Everything a report holds is plain data ([`Report`]), so the table, the JSON
//! and the SVG are three renderings of the same numbers.

mod gemm;
mod gemv;
mod ladder;
mod measure;
mod plot;
mod table;
mod traffic;
mod ttft;

pub use gemm::{run_gemm, GemmOptions, GemmReport, GemmResult, GemmShape};
pub use gemv::{run_gemv, GemvOptions, GemvReport, GemvTiming};
pub use ladder::{LadderStep, Rung, StageTime, LADDER_PROMPT_SIZES};
pub use measure::{bench_backend, BenchEvent, BenchOptions};
pub use plot::render_svg;
pub use table::{render_gemm, render_gemv, render_table};
pub use traffic::{peak_rss_bytes, probe_read_gbps, reset_peak_rss, weight_bytes_per_token};
pub use ttft::{time_to_first_token, TtftOptions, TtftReport};

use serde::Serialize;

/// Median and range of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; NaN (null in JSON) when there are none.
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |i: usize| sorted.get(i).copied().unwrap_or(f64::NAN);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            at(mid)
        } else {
            (at(mid.wrapping_sub(1)) + at(mid)) / 2.0
        };
        Spread {
            median,
            min: at(0),
            max: at(sorted.len().wrapping_sub(1)),
        }
    }
}

/// One whole `qwen35 bench` run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Set when the numbers are not the model's (layers skipped): why.
    pub invalid: Option<String>,
    /// The model: a file path, or the preset and quantization it was synthesized from.
    pub model: String,
    pub file_bytes: u64,
    /// Weight bytes one decode token reads: every run layer's tensors, the output matrix and one
    /// embedding row.
    pub weight_bytes_per_token: u64,
    pub threads: usize,
    pub prompt_sizes: Vec<usize>,
    pub decode_tokens: usize,
    /// Prompt lengths decode was also timed after (`--depth`).
    pub depths: Vec<usize>,
    pub repeats: usize,
    pub backends: Vec<BackendReport>,
}

/// One backend's results, or why it could not run.
#[derive(Clone, Debug, Serialize)]
pub struct BackendReport {
    pub backend: String,
    pub error: Option<String>,
    pub run: Option<BackendRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BackendRun {
    pub load_seconds: f64,
    pub prefill: Vec<PrefillResult>,
    pub decode: DecodeResult,
    /// The whole process's peak resident memory while this backend ran (Linux VmHWM, reset
    /// before the backend was loaded where the kernel allows it); GPU memory is not in it.
    pub process_peak_rss_bytes: Option<u64>,
    /// Weight bytes per decode token × median decode tok/s.
    pub effective_gbps: f64,
    pub peak: Peak,
    /// effective / peak, when the peak is known.
    pub share_of_peak: Option<f64>,
    /// The decode roofline: peak GB/s / weight bytes per token.
    pub decode_ceiling_tok_per_s: Option<f64>,
    /// Per decode token, counted on the timed runs (the CPU: on a profiled pass); None when the
    /// backend does not count them.
    pub dispatches_per_token: Option<f64>,
    pub submits_per_token: Option<f64>,
    pub profile: Option<Profile>,
    /// Decode through `qwen35 run`'s loop ([`crate::generate::generate`]), greedy and sampled;
    /// empty where the model has no tokenizer.
    pub run_path: Vec<RunPathResult>,
    /// `--ladder`: the prefill isolation ladder at each prompt size.
    pub ladder: Option<Vec<LadderStep>>,
    /// Decode after a prompt of each `--depth`, the cache filled that far.
    pub decode_at_depth: Vec<DecodeAtDepth>,
}

/// Greedy decode of `tokens` after a prompt of `depth` tokens (`llama-bench -d`'s measure).
#[derive(Clone, Debug, Serialize)]
pub struct DecodeAtDepth {
    pub depth: usize,
    pub tokens: usize,
    pub tok_per_s: Spread,
    pub ms_per_token: Spread,
}

/// Decode speed of `qwen35 run` with one sampling setting, as `-n` tokens after the same
/// 16-token prompt as the decode column.
#[derive(Clone, Debug, Serialize)]
pub struct RunPathResult {
    /// The `run` flags, e.g. "--temp 0".
    pub flags: String,
    pub tokens: usize,
    pub tok_per_s: Spread,
}

impl Report {
    /// Every prompt length some backend prefilled, ascending: backends may run sizes of their own
    /// (`qwen35 bench --cpu-prompt`), and one table or chart shows them all.
    pub fn prefill_columns(&self) -> Vec<usize> {
        let mut sizes = self.prompt_sizes.clone();
        for run in self.backends.iter().filter_map(|b| b.run.as_ref()) {
            for prefill in &run.prefill {
                if !sizes.contains(&prefill.tokens) {
                    sizes.push(prefill.tokens);
                }
            }
        }
        sizes.sort_unstable();
        sizes
    }

    /// The decode length every backend that ran used, if they agree.
    pub fn common_decode_tokens(&self) -> Option<usize> {
        let mut runs = self.backends.iter().filter_map(|b| b.run.as_ref());
        let first = runs.next().map_or(self.decode_tokens, |r| r.decode.tokens);
        runs.all(|r| r.decode.tokens == first).then_some(first)
    }
}

impl BackendRun {
    /// The prefill rate at a prompt of `tokens`, if this backend ran that size.
    pub fn prefill_at(&self, tokens: usize) -> Option<Spread> {
        self.prefill
            .iter()
            .find(|p| p.tokens == tokens)
            .map(|p| p.tok_per_s)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PrefillResult {
    pub tokens: usize,
    pub tok_per_s: Spread,
}

#[derive(Clone, Debug, Serialize)]
pub struct DecodeResult {
    pub tokens: usize,
    pub tok_per_s: Spread,
    pub ms_per_token: Spread,
}

/// The memory bandwidth a backend's decode is held against.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Peak {
    pub gbps: Option<f64>,
    pub source: PeakSource,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// `--peak-gbps`.
    Given,
    /// The CPU streaming-read probe.
    Probe,
    /// A GPU without `--peak-gbps`.
    Unknown,
}

/// Where the time went, per op class, on one profiled prefill and one profiled decode.
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    pub prefill: OpProfile,
    pub decode: OpProfile,
}

#[derive(Clone, Debug, Serialize)]
pub struct OpProfile {
    /// Tokens the profiled pass ran (one prompt for prefill, one at a time for decode).
    pub tokens: usize,
    /// Slowest class first.
    pub ops: Vec<OpRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct OpRow {
    pub class: String,
    pub ms: f64,
    pub percent: f64,
    pub calls: u64,
    pub ms_per_call: f64,
    pub gbps: f64,
}
