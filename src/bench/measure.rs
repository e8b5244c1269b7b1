//! Timing one backend: load, prefill per prompt size, greedy decode, and one profiled pass that
//! counts dispatches (and, with `--profile`, times every op class) apart from the timed runs.

use std::sync::Arc;
use std::time::Instant;

use super::ladder;
use super::table::spread;
use super::traffic::{peak_rss_bytes, reset_peak_rss};
use super::{
    BackendReport, BackendRun, DecodeAtDepth, DecodeResult, OpProfile, OpRow, Peak, PrefillResult,
    Profile, RunPathResult, Spread,
};
use crate::backend::gpu::GpuOptions;
use crate::backend::{BackendOptions, BackendStats, OpTiming};
use crate::generate::{generate, Limits, StopReason};
use crate::gguf::GgufFile;
use crate::model::SkipLayers;
use crate::model::{load_engine_with, BackendKind, Engine, ModelError};
use crate::sample::{argmax, Sampler, SamplerConfig};
use crate::tokenizer::Tokenizer;
use crate::units::count;

/// What to measure on each backend.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Prompt lengths timed for prefill, each from an empty state.
    pub prompt_sizes: Vec<usize>,
    /// Greedy tokens timed for decode.
    pub decode_tokens: usize,
    /// Prompt lengths after which decode is timed again, the cache that deep (`bench -d`).
    pub depths: Vec<usize>,
    /// Runs of each measurement; the report gives their median and range.
    pub repeats: usize,
    /// CPU threads (0: one per core).
    pub threads: usize,
    pub profile: bool,
    pub skip: SkipLayers,
    /// Also run the prefill isolation ladder ([`super::ladder`]) at the prompt sizes.
    pub ladder: bool,
    /// Seed of the random prompt tokens.
    pub seed: u64,
    /// The GPU backends' settings.
    pub gpu: GpuOptions,
}

/// Tokens prefilled before decode is timed, so decode does not start from an empty state.
const DECODE_PROMPT: usize = 16;
/// Tokens per forward while the cache is filled to a depth: a whole 32k-token prompt in one
/// forward would hold activations of that many rows.
const DEPTH_CHUNK: usize = 4096;

/// What [`bench_backend`] reports as it goes.
pub enum BenchEvent<'a> {
    /// A step begins (loading, one timed run): a transient status line.
    Starting(&'a str),
    /// A measurement finished: its result, worth a line of its own in a log.
    Measured(&'a str),
}

/// Loads `file` on `kind` and measures it; a backend that fails is reported with its error.
/// `peak` is the bandwidth its decode is held against; `progress` hears of every step.
pub fn bench_backend(
    file: &Arc<GgufFile>,
    kind: BackendKind,
    opts: &BenchOptions,
    weight_bytes_per_token: u64,
    peak: Peak,
    progress: &mut dyn FnMut(BenchEvent),
) -> BackendReport {
    let outcome = measure(file, kind, opts, weight_bytes_per_token, peak, progress);
    BackendReport {
        backend: kind.name().to_string(),
        error: outcome.as_ref().err().map(|e| e.to_string()),
        run: outcome.ok(),
    }
}

fn measure(
    file: &Arc<GgufFile>,
    kind: BackendKind,
    opts: &BenchOptions,
    weight_bytes_per_token: u64,
    peak: Peak,
    progress: &mut dyn FnMut(BenchEvent),
) -> Result<BackendRun, ModelError> {
    let repeats = opts.repeats.max(1);
    let decode_tokens = opts.decode_tokens.max(1);
    let longest = opts.prompt_sizes.iter().copied().max().unwrap_or(1);
    let deepest = opts.depths.iter().copied().max().unwrap_or(0);
    let ctx = longest.max(DECODE_PROMPT).max(deepest) + decode_tokens + 1;

    progress(BenchEvent::Starting(&format!("{kind}: loading")));
    reset_peak_rss();
    let started = Instant::now();
    let options = BackendOptions {
        threads: opts.threads,
        gpu: opts.gpu.clone(),
    };
    let mut engine = load_engine_with(Arc::clone(file), kind, &options, ctx)?;
    let load_seconds = started.elapsed().as_secs_f64();
    engine.set_skip(opts.skip);
    let mut prompts = RandomTokens::new(opts.seed, engine.config().vocab);

    // One untimed prefill and decode: first-use costs (pipeline compilation, page faults of the
    // mapped weights) are not what the runs measure.
    progress(BenchEvent::Starting(&format!(
        "{kind}: loaded in {load_seconds:.2} s; warming up"
    )));
    let first = engine.eval(&prompts.take(DECODE_PROMPT), false)?;
    engine.eval(&[argmax(&first)], false)?;

    let mut prefill = Vec::new();
    for &tokens in &opts.prompt_sizes {
        let mut rates = Vec::new();
        for run in 1..=repeats {
            progress(BenchEvent::Starting(&format!(
                "{kind}: prefill {}, run {run}/{repeats}",
                count(tokens, "token")
            )));
            engine.reset();
            let prompt = prompts.take(tokens);
            let started = Instant::now();
            engine.eval(&prompt, false)?;
            rates.push(tokens as f64 / started.elapsed().as_secs_f64());
        }
        let tok_per_s = Spread::of(&rates);
        progress(BenchEvent::Measured(&format!(
            "{kind}: prefill {}: {} tok/s",
            count(tokens, "token"),
            spread(tok_per_s)
        )));
        prefill.push(PrefillResult { tokens, tok_per_s });
    }
    let ladder = if opts.ladder {
        let steps = ladder::climb(
            kind,
            engine.as_mut(),
            &opts.prompt_sizes,
            repeats,
            &mut |tokens| prompts.take(tokens),
            progress,
        )?;
        engine.set_skip(opts.skip);
        Some(steps)
    } else {
        None
    };

    let mut seconds = Vec::new();
    let mut timed_counts = BackendStats::default();
    for run in 1..=repeats {
        progress(BenchEvent::Starting(&format!(
            "{kind}: decode {}, run {run}/{repeats}",
            count(decode_tokens, "token")
        )));
        engine.reset();
        let next = argmax(&engine.eval(&prompts.take(DECODE_PROMPT), false)?);
        engine.take_stats();
        let started = Instant::now();
        engine.decode_greedy(next, decode_tokens, &mut |_| true)?;
        seconds.push(started.elapsed().as_secs_f64());
        timed_counts = engine.take_stats();
    }
    let tok_per_s: Vec<f64> = seconds.iter().map(|s| decode_tokens as f64 / s).collect();
    let ms_per_token: Vec<f64> = seconds
        .iter()
        .map(|s| s * 1e3 / decode_tokens as f64)
        .collect();

    progress(BenchEvent::Measured(&format!(
        "{kind}: decode {}: {} tok/s",
        count(decode_tokens, "token"),
        spread(Spread::of(&tok_per_s))
    )));
    let mut decode_at_depth = Vec::new();
    for &depth in &opts.depths {
        let depth_run = DepthRun {
            kind,
            depth,
            tokens: decode_tokens,
            repeats,
        };
        decode_at_depth.push(depth_run.measure(engine.as_mut(), &mut prompts, progress)?);
    }
    let run_path = match Tokenizer::from_gguf(file) {
        Ok(tokenizer) => run_path_sampling()
            .iter()
            .map(|(flags, config)| {
                progress(BenchEvent::Starting(&format!(
                    "{kind}: run {flags}, {}",
                    count(decode_tokens, "token")
                )));
                let rates = (0..repeats)
                    .map(|_| {
                        engine.reset();
                        let prompt = prompts.take(DECODE_PROMPT);
                        run_path_rate(engine.as_mut(), &tokenizer, config, &prompt, decode_tokens)
                    })
                    .collect::<Result<Vec<f64>, ModelError>>()?;
                progress(BenchEvent::Measured(&format!(
                    "{kind}: run {flags}: {} tok/s",
                    spread(Spread::of(&rates))
                )));
                Ok(RunPathResult {
                    flags: flags.to_string(),
                    tokens: decode_tokens,
                    tok_per_s: Spread::of(&rates),
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?,
        Err(e) => {
            progress(BenchEvent::Measured(&format!(
                "{kind}: no run-path rows: {e}"
            )));
            Vec::new()
        }
    };

    progress(BenchEvent::Starting(&format!("{kind}: profiled pass")));
    // Without --profile the pass only counts dispatches, on one token.
    let (profile_prompt, profile_tokens) = if opts.profile {
        (longest, decode_tokens)
    } else {
        (DECODE_PROMPT, 1)
    };
    let (prefill_stats, decode_stats) = profiled_pass(
        engine.as_mut(),
        &prompts.take(profile_prompt),
        profile_tokens,
    )?;
    // A GPU counts on the timed runs themselves; the CPU counts only while profiling. (The
    // profiled pass would count one submit too many per token: it times each readback apart.)
    let (counts, counted_tokens) = if timed_counts.dispatches > 0 {
        (&timed_counts, decode_tokens)
    } else {
        (&decode_stats, profile_tokens)
    };
    let counted = counts.dispatches > 0;
    let per_token = |n: u64| Some(n as f64 / counted_tokens as f64).filter(|_| counted);
    let dispatches_per_token = per_token(counts.dispatches);
    let submits_per_token = per_token(counts.submits);
    let profile = opts.profile.then(|| Profile {
        prefill: op_profile(&prefill_stats, profile_prompt),
        decode: op_profile(&decode_stats, profile_tokens),
    });
    let process_peak_rss_bytes = peak_rss_bytes();

    let decode = DecodeResult {
        tokens: decode_tokens,
        tok_per_s: Spread::of(&tok_per_s),
        ms_per_token: Spread::of(&ms_per_token),
    };
    let effective_gbps = weight_bytes_per_token as f64 * decode.tok_per_s.median / 1e9;
    let peak_gbps = peak.gbps.filter(|&p| p > 0.0);
    Ok(BackendRun {
        load_seconds,
        prefill,
        decode,
        process_peak_rss_bytes,
        effective_gbps,
        peak,
        share_of_peak: peak_gbps.map(|p| effective_gbps / p),
        decode_ceiling_tok_per_s: peak_gbps
            .filter(|_| weight_bytes_per_token > 0)
            .map(|p| p * 1e9 / weight_bytes_per_token as f64),
        dispatches_per_token,
        submits_per_token,
        profile,
        run_path,
        ladder,
        decode_at_depth,
    })
}

/// Greedy decode of `tokens` timed after a prompt of `depth` random tokens, `repeats` times.
struct DepthRun {
    kind: BackendKind,
    depth: usize,
    tokens: usize,
    repeats: usize,
}

impl DepthRun {
    /// The prompt is prefilled once, untimed, in chunks of [`DEPTH_CHUNK`] tokens; every run
    /// starts from a snapshot of the state it left.
    fn measure(
        &self,
        engine: &mut dyn Engine,
        prompts: &mut RandomTokens,
        progress: &mut dyn FnMut(BenchEvent),
    ) -> Result<DecodeAtDepth, ModelError> {
        let DepthRun {
            kind,
            depth,
            tokens,
            repeats,
        } = *self;
        progress(BenchEvent::Starting(&format!(
            "{kind}: filling the cache to depth {depth}"
        )));
        engine.reset();
        let prompt = prompts.take(depth);
        let mut next = prompts.take(1)[0];
        for chunk in prompt.chunks(DEPTH_CHUNK) {
            next = argmax(&engine.eval(chunk, false)?);
        }
        let filled = engine.snapshot()?;
        let mut seconds = Vec::new();
        for run in 1..=repeats {
            progress(BenchEvent::Starting(&format!(
                "{kind}: decode {} at depth {depth}, run {run}/{repeats}",
                count(tokens, "token")
            )));
            engine.restore(&filled)?;
            let started = Instant::now();
            engine.decode_greedy(next, tokens, &mut |_| true)?;
            seconds.push(started.elapsed().as_secs_f64());
        }
        let of_seconds = |f: fn(f64, f64) -> f64| {
            Spread::of(
                &seconds
                    .iter()
                    .map(|&s| f(s, tokens as f64))
                    .collect::<Vec<_>>(),
            )
        };
        let result = DecodeAtDepth {
            depth,
            tokens,
            tok_per_s: of_seconds(|s, n| n / s),
            ms_per_token: of_seconds(|s, n| s * 1e3 / n),
        };
        progress(BenchEvent::Measured(&format!(
            "{kind}: decode {} at depth {depth}: {} tok/s",
            count(tokens, "token"),
            spread(result.tok_per_s)
        )));
        Ok(result)
    }
}

/// `qwen35 run`'s settings for the run-path rows: greedy, and the CLI's default sampling
/// (temperature 0.7, top-k 20, top-p 0.8), seeded.
fn run_path_sampling() -> [(&'static str, SamplerConfig); 2] {
    let with_temperature = |temperature| SamplerConfig {
        temperature,
        top_k: 20,
        top_p: 0.8,
        seed: 1,
        ..SamplerConfig::default()
    };
    [
        ("--temp 0", with_temperature(0.0)),
        ("--temp 0.7", with_temperature(0.7)),
    ]
}

/// Decode tok/s of [`generate`] after `prompt`, `tokens` at most (fewer where the model ends
/// the text).
fn run_path_rate(
    engine: &mut dyn Engine,
    tokenizer: &Tokenizer,
    config: &SamplerConfig,
    prompt: &[u32],
    tokens: usize,
) -> Result<f64, ModelError> {
    let never = std::sync::atomic::AtomicBool::new(false);
    let generation = generate(
        engine,
        tokenizer,
        &mut Sampler::new(config.clone()),
        prompt,
        &mut Vec::new(),
        Limits {
            max_new_tokens: tokens,
            interrupt: &never,
        },
        |_| std::ops::ControlFlow::Continue(()),
    )?;
    // The end-of-text token, if one stopped it, was chosen too.
    let ended = matches!(generation.stop, StopReason::EndOfGeneration(_));
    let chosen = generation.decode_tokens + usize::from(ended);
    Ok(chosen.max(1) as f64 / generation.decode_secs.max(f64::MIN_POSITIVE))
}

/// Prefills `prompt` from an empty state, then decodes `tokens` greedily, with profiling on;
/// returns the engine's counters of each half, with the time the token choices took as the
/// class `sampling`.
fn profiled_pass(
    engine: &mut dyn Engine,
    prompt: &[u32],
    tokens: usize,
) -> Result<(BackendStats, BackendStats), ModelError> {
    engine.reset();
    engine.set_profiling(true);
    engine.take_stats();
    let result = (|| {
        let mut sampling = Sampling::default();
        let next = sampling.argmax(&engine.eval(prompt, false)?);
        let prefill = sampling.added_to(engine.take_stats());
        // Greedy decoding chooses on the backend: its argmax is in the backend's own counts.
        engine.decode_greedy(next, tokens, &mut |_| true)?;
        Ok((prefill, engine.take_stats()))
    })();
    engine.set_profiling(false);
    result
}

/// The time spent choosing tokens from logits.
#[derive(Default)]
struct Sampling(OpTiming);

impl Sampling {
    fn argmax(&mut self, logits: &[f32]) -> u32 {
        let started = Instant::now();
        let token = argmax(logits);
        self.0.seconds += started.elapsed().as_secs_f64();
        self.0.calls += 1;
        self.0.bytes_read += std::mem::size_of_val(logits) as u64;
        token
    }

    /// `stats` with the choices since the last call as one more class.
    fn added_to(&mut self, mut stats: BackendStats) -> BackendStats {
        let mut timing = std::mem::take(&mut self.0);
        timing.class = "sampling".into();
        stats.ops.push(timing);
        stats
    }
}

fn op_profile(stats: &BackendStats, tokens: usize) -> OpProfile {
    let total: f64 = stats.ops.iter().map(|op| op.seconds).sum();
    let mut ops: Vec<OpRow> = stats
        .ops
        .iter()
        .map(|op| OpRow {
            class: op.class.clone(),
            ms: op.seconds * 1e3,
            percent: 100.0 * op.seconds / total.max(f64::MIN_POSITIVE),
            calls: op.calls,
            ms_per_call: op.seconds * 1e3 / op.calls.max(1) as f64,
            gbps: op.bytes_read as f64 / op.seconds.max(f64::MIN_POSITIVE) / 1e9,
        })
        .collect();
    ops.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    OpProfile { tokens, ops }
}

/// Uniform random token ids (splitmix64): prompts whose content does not matter to the speed.
struct RandomTokens {
    state: u64,
    vocab: u64,
}

impl RandomTokens {
    fn new(seed: u64, vocab: usize) -> RandomTokens {
        RandomTokens {
            state: seed,
            vocab: (vocab as u64).max(1),
        }
    }

    fn take(&mut self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| {
                self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = self.state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                ((z ^ (z >> 31)) % self.vocab) as u32
            })
            .collect()
    }
}
