//! `qwen35 bench --ladder`, the prefill isolation ladder: each prompt size prefilled in full
//! (rung 0), without the delta-net layers' token mixing (rung 1), without the attention layers'
//! (rung 2) and without either (rung 3, the floor of matrix products, norms and activations).
//! A rung's wall time against rung 0's is what that mixing costs, overlap and waits included,
//! which a per-op profile cannot show; each rung's profiled prefill says where its time went.

use serde::Serialize;
use std::time::Instant;

use super::{BenchEvent, Spread};
use crate::backend::BackendStats;
use crate::model::{BackendKind, Engine, ModelError, SkipLayers};
use crate::units::count;

/// The rungs in order, each with the `--skip` it runs under.
const RUNGS: [(SkipLayers, &str); 4] = [
    (SkipLayers::None, "full"),
    (SkipLayers::DeltaNet, "skip gdn"),
    (SkipLayers::Attention, "skip attn"),
    (SkipLayers::Both, "skip both"),
];

/// The prompt sizes of `--ladder` without `-p`.
pub const LADDER_PROMPT_SIZES: [usize; 4] = [256, 512, 1024, 4096];

/// The stages a prefill's op classes fall into, in the order the table shows them.
pub const STAGES: [&str; 6] = [
    "gemm",
    "delta_rule",
    "attention",
    "qk_norm_rope",
    "norms_activations",
    "other",
];

/// The ladder at one prompt size.
#[derive(Clone, Debug, Serialize)]
pub struct LadderStep {
    pub tokens: usize,
    /// Rungs 0 to 3.
    pub rungs: Vec<Rung>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Rung {
    /// "full", "skip gdn", "skip attn" or "skip both".
    pub name: String,
    pub tok_per_s: Spread,
    /// Wall time of one prefill.
    pub ms: Spread,
    /// Dispatches (GPU) or ops (CPU) of the profiled prefill.
    pub dispatches: u64,
    /// The profiled prefill by stage, every stage of [`STAGES`] in order.
    pub stages: Vec<StageTime>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StageTime {
    pub stage: String,
    /// None where the backend timed no op (a GPU without timestamps inside passes).
    pub ms: Option<f64>,
    pub calls: u64,
}

/// The stage of an op class as the backends name them (see `Kernel::class` and the CPU
/// backend's): the delta net's conv, q/k/v split and L2 norms count with its delta rule.
pub fn stage_of(class: &str) -> &'static str {
    let is = |prefix: &str| class.starts_with(prefix);
    if is("matmul") || is("gemm") || class == "quantize x" || class == "lm_head" {
        "gemm"
    } else if is("delta_") || is("conv") || class == "l2_norm" {
        "delta_rule"
    } else if is("attention") {
        "attention"
    } else if class == "qk_norm_rope" || class == "rope" {
        "qk_norm_rope"
    } else if matches!(
        class,
        "rms_norm" | "gated_rms_norm" | "swiglu" | "sigmoid_mul" | "add"
    ) {
        "norms_activations"
    } else {
        "other"
    }
}

/// Runs the ladder at each of `sizes`, `repeats` timed prefills a rung plus one profiled, each of
/// a `new_prompt(size)`; leaves the engine with nothing skipped.
pub(super) fn climb(
    kind: BackendKind,
    engine: &mut dyn Engine,
    sizes: &[usize],
    repeats: usize,
    new_prompt: &mut dyn FnMut(usize) -> Vec<u32>,
    progress: &mut dyn FnMut(BenchEvent),
) -> Result<Vec<LadderStep>, ModelError> {
    let mut steps = Vec::new();
    for &tokens in sizes {
        let mut rungs = Vec::new();
        for (skip, name) in RUNGS {
            engine.set_skip(skip);
            let mut seconds = Vec::new();
            for run in 1..=repeats {
                progress(BenchEvent::Starting(&format!(
                    "{kind}: ladder, {name}, prefill {}, run {run}/{repeats}",
                    count(tokens, "token")
                )));
                engine.reset();
                let prompt = new_prompt(tokens);
                let started = Instant::now();
                engine.eval(&prompt, false)?;
                seconds.push(started.elapsed().as_secs_f64());
            }
            let stats = profiled_prefill(engine, &new_prompt(tokens))?;
            let rate: Vec<f64> = seconds.iter().map(|s| tokens as f64 / s).collect();
            let ms: Vec<f64> = seconds.iter().map(|s| s * 1e3).collect();
            let rung = Rung {
                name: name.to_string(),
                tok_per_s: Spread::of(&rate),
                ms: Spread::of(&ms),
                dispatches: stats.dispatches,
                stages: stages(&stats),
            };
            progress(BenchEvent::Measured(&format!(
                "{kind}: ladder, {name}, prefill {}: {:.1} tok/s",
                count(tokens, "token"),
                rung.tok_per_s.median
            )));
            rungs.push(rung);
        }
        steps.push(LadderStep { tokens, rungs });
    }
    engine.set_skip(SkipLayers::None);
    Ok(steps)
}

/// The engine's counters of one prefill of `prompt` from an empty state, with profiling on.
fn profiled_prefill(engine: &mut dyn Engine, prompt: &[u32]) -> Result<BackendStats, ModelError> {
    engine.reset();
    engine.set_profiling(true);
    engine.take_stats();
    let result = engine.eval(prompt, false).map(|_| engine.take_stats());
    engine.set_profiling(false);
    result
}

fn stages(stats: &BackendStats) -> Vec<StageTime> {
    let timed = stats.ops.iter().any(|op| op.seconds > 0.0);
    STAGES
        .iter()
        .map(|&stage| {
            let ops = || stats.ops.iter().filter(|op| stage_of(&op.class) == stage);
            StageTime {
                stage: stage.to_string(),
                ms: timed.then(|| ops().fold(0.0, |ms, op| ms + op.seconds * 1e3)),
                calls: ops().map(|op| op.calls).sum(),
            }
        })
        .collect()
}
