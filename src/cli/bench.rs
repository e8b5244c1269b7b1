//! `qwen35 bench`: the backend comparison benchmark (prefill, decode, roofline, profile) on a
//! model file or a synthetic one, and the microbenchmarks `qwen35 bench gemv` and `bench gemm`.

use super::{at_least_one, cpu_threads, open_gguf, parse_backend, GpuArgs};
use anyhow::Context;
use clap::{Args, Subcommand};
use qwen35::backend::cpu::{CpuBackend, CpuMode};
use qwen35::backend::gpu::Wgpu;
use qwen35::backend::metal;
use qwen35::backend::Backend;
use qwen35::bench::{
    bench_backend, probe_read_gbps, render_gemm, render_gemv, render_svg, render_table, run_gemm,
    run_gemv, time_to_first_token, weight_bytes_per_token, BenchEvent, BenchOptions, GemmOptions,
    GemmReport, GemmShape, GemvOptions, GemvReport, Peak, PeakSource, Report, TtftOptions,
    LADDER_PROMPT_SIZES,
};
use qwen35::gguf::GgufFile;
use qwen35::model::SkipLayers;
use qwen35::model::{load_engine, BackendKind, Config};
use qwen35::quant::GgmlType;
use qwen35::synth::{write_synthetic, Preset, Quant, SynthOptions};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    micro: Option<Micro>,
    #[command(flatten)]
    model: ModelBenchArgs,
}

#[derive(Subcommand)]
enum Micro {
    /// One GEMV through the backend op set: per call, back to back, and a 256×256 overhead floor.
    Gemv(GemvArgs),
    /// The prefill matrix product (P rows times a quantized weight) in TFLOP/s, by weight shape
    /// and P; by default the shapes of a Qwen3.6-27B Q4_K_M prefill.
    Gemm(GemmArgs),
    /// Time to first token for a long system prompt and a short question, cold against the
    /// system prompt's state restored from the prefix cache.
    Ttft(TtftArgs),
}

#[derive(Args)]
struct TtftArgs {
    #[command(flatten)]
    source: ModelSource,
    #[arg(long, value_parser = parse_backend, default_value = "cpu")]
    backend: BackendKind,
    /// Tokens of the system prompt.
    #[arg(long, value_parser = at_least_one, default_value = "4096")]
    system_tokens: usize,
    /// Tokens of the question after it.
    #[arg(long, value_parser = at_least_one, default_value = "32")]
    question_tokens: usize,
    /// Cold/restored pairs timed.
    #[arg(short = 'r', long = "repeats", value_parser = at_least_one, default_value = "3")]
    repeats: usize,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the numbers as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The model a benchmark runs: a file, or a synthetic one of a preset size.
#[derive(Args)]
struct ModelSource {
    /// GGUF model file (default: a synthetic model of --preset, written to a temporary file).
    #[arg(short, long, conflicts_with = "preset")]
    model: Option<PathBuf>,
    /// Model size to synthesize when no --model is given: qwen3.6-27b, qwen3.5-9b, qwen3.5-4b,
    /// qwen3.5-2b, qwen3.5-0.8b or tiny.
    #[arg(long, value_parser = super::synth::parse_preset)]
    preset: Option<Preset>,
    /// File type of the synthetic model: q4_k_m, q8_0 or f16.
    #[arg(long, value_parser = super::synth::parse_quant, default_value = "q4_k_m", conflicts_with = "model")]
    quant: Quant,
}

impl ModelSource {
    /// The model file (synthesized with `seed` when none is given, deleted when the returned
    /// guard drops) and how to name it in reports.
    fn open(
        &self,
        seed: u64,
        progress: &mut Progress,
    ) -> anyhow::Result<(Arc<GgufFile>, String, Option<TempGguf>)> {
        match &self.model {
            Some(path) => Ok((open_gguf(path)?, path.display().to_string(), None)),
            None => {
                let preset = self.preset.unwrap_or(Preset::Tiny);
                let temp = synthesize(preset, self.quant, seed, progress)?;
                let label = format!(
                    "{} {} (synthetic, random weights)",
                    preset.name(),
                    self.quant.name()
                );
                Ok((open_gguf(&temp.0)?, label, Some(temp)))
            }
        }
    }
}

#[derive(Args)]
struct ModelBenchArgs {
    #[command(flatten)]
    source: ModelSource,
    /// Backends to compare, comma-separated (cpu, cpu-fast, wgpu, metal).
    #[arg(long, value_delimiter = ',', value_parser = parse_backend, default_value = "cpu")]
    backend: Vec<BackendKind>,
    /// Prompt lengths timed for prefill, comma-separated (default 512; with --ladder 256,512,1024,4096).
    #[arg(short = 'p', long = "prompt", value_delimiter = ',', allow_negative_numbers = true, value_parser = at_least_one)]
    prompt_sizes: Vec<usize>,
    /// Tokens timed for decode.
    #[arg(short = 'n', long = "decode", allow_negative_numbers = true, value_parser = at_least_one, default_value = "128")]
    decode_tokens: usize,
    /// Decode timed again after a prompt of each of these lengths, comma-separated (the KV
    /// cache that deep, as llama-bench -d); rows "tg128 @ d4096".
    #[arg(short = 'd', long = "depth", value_delimiter = ',')]
    depths: Vec<usize>,
    /// Prompt lengths for the CPU backends (cpu, cpu-fast) instead of -p: on a large model the
    /// CPU takes minutes per prefill at the sizes a GPU is timed at. Same table, own columns.
    #[arg(long = "cpu-prompt", value_delimiter = ',', allow_negative_numbers = true, value_parser = at_least_one)]
    cpu_prompt_sizes: Option<Vec<usize>>,
    /// Decode tokens for the CPU backends instead of -n.
    #[arg(long = "cpu-decode", allow_negative_numbers = true, value_parser = at_least_one)]
    cpu_decode_tokens: Option<usize>,
    /// Runs of each measurement (the report gives the median and range).
    #[arg(short = 'r', long = "repeats", allow_negative_numbers = true, value_parser = at_least_one, default_value = "3")]
    repeats: usize,
    /// CPU threads (default: all cores); also used by the bandwidth probe.
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one)]
    threads: Option<usize>,
    #[command(flatten)]
    gpu: GpuArgs,
    /// Write every number as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw tok/s per backend and prompt size, with the decode roofline, as SVG to this file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Time every op class on a separate prefill and decode pass.
    #[arg(long)]
    profile: bool,
    /// Leave out the token mixing of the gdn layers, the attn layers or both, keeping their
    /// projections and MLP; the results are marked INVALID.
    #[arg(long, value_parser = parse_skip)]
    skip: Option<SkipLayers>,
    /// The prefill isolation ladder at each -p: in full, with --skip gdn, attn and both, and the
    /// full prefill's time by stage.
    #[arg(long, conflicts_with = "skip")]
    ladder: bool,
    /// Op classes of the GPU backend (as --profile names them, e.g. "matmul q6_K") left out of
    /// every dispatch, to price each by its absence; the results are marked INVALID.
    #[arg(long, value_delimiter = ',')]
    leave_out: Vec<String>,
    /// Memory bandwidth in GB/s to hold decode against (default: a streaming-read probe on the
    /// CPU; unknown for GPUs).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_gbps)]
    peak_gbps: Option<f64>,
    /// Seed of the random prompts and of the synthetic weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// The flags of the microbenchmarks (gemv, gemm) past their own: how the backend runs and where
/// the report goes.
#[derive(Args)]
struct MicrobenchRun {
    /// CPU threads (default: all cores).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one)]
    threads: Option<usize>,
    #[command(flatten)]
    gpu: GpuArgs,
    /// Write the numbers as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct GemvArgs {
    /// Weight type (e.g. q4_k, q6_k, q8_0, f16, bf16, f32).
    #[arg(long, value_parser = parse_ggml_type)]
    quant: GgmlType,
    /// Output rows of the matrix.
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one, default_value = "4096")]
    rows: usize,
    /// Input columns of the matrix (whole blocks of the type).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one, default_value = "4096")]
    cols: usize,
    #[arg(long, value_parser = parse_backend, default_value = "cpu")]
    backend: BackendKind,
    /// GEMVs per timing.
    #[arg(short = 'r', long = "repeats", allow_negative_numbers = true, value_parser = at_least_one, default_value = "100")]
    repeats: usize,
    #[command(flatten)]
    run: MicrobenchRun,
}

#[derive(Args)]
struct GemmArgs {
    /// Weights as TYPE:ROWSxCOLS, comma-separated (default: the Qwen3.6-27B Q4_K_M prefill's).
    #[arg(long, value_delimiter = ',', value_parser = parse_gemm_shape)]
    shapes: Vec<GemmShape>,
    /// Activation rows (prompt tokens), comma-separated.
    #[arg(short = 'p', long = "rows", value_delimiter = ',', value_parser = at_least_one, default_value = "64,256,1024,4096,16384")]
    rows: Vec<usize>,
    #[arg(long, value_parser = parse_backend, default_value = "wgpu")]
    backend: BackendKind,
    /// Products per timing, back to back.
    #[arg(short = 'r', long = "repeats", allow_negative_numbers = true, value_parser = at_least_one, default_value = "3")]
    repeats: usize,
    #[command(flatten)]
    run: MicrobenchRun,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.micro {
        Some(Micro::Gemv(gemv)) => run_gemv_bench(gemv),
        Some(Micro::Gemm(gemm)) => run_gemm_bench(gemm),
        Some(Micro::Ttft(ttft)) => run_ttft_bench(ttft),
        None => run_model_bench(args.model),
    }
}

fn run_model_bench(args: ModelBenchArgs) -> anyhow::Result<()> {
    let threads = cpu_threads(args.threads);
    let skip = args.skip.unwrap_or_default();
    let prompt_sizes = match (args.prompt_sizes.is_empty(), args.ladder) {
        (false, _) => args.prompt_sizes,
        (true, false) => vec![512],
        (true, true) => LADDER_PROMPT_SIZES.to_vec(),
    };
    let mut progress = Progress::new();
    if args.source.model.is_none() && args.source.preset.is_none() {
        eprintln!(
            "no --model or --preset given: benchmarking the tiny preset (a synthetic 4-layer \
             model; --preset qwen3.5-0.8b is the smallest real size)"
        );
    }
    let small =
        args.source.model.is_none() && matches!(args.source.preset, None | Some(Preset::Tiny));
    if args.backend.contains(&BackendKind::Wgpu) {
        warn_of_a_software_rasterizer(small);
    }
    let (file, model, _temp) = args.source.open(args.seed, &mut progress)?;
    let config = Config::from_gguf(&file).context("reading the model's configuration")?;
    let most_decoded = args.decode_tokens.max(args.cpu_decode_tokens.unwrap_or(0));
    if let Some(&depth) = args
        .depths
        .iter()
        .find(|&&d| d.saturating_add(most_decoded) > config.train_context)
    {
        anyhow::bail!(
            "--depth {depth}: a prompt of {depth} tokens and {most_decoded} decoded tokens do not \
             fit the model's context of {} tokens",
            config.train_context
        );
    }
    let bytes_per_token = weight_bytes_per_token(&file, &config);
    let opts = BenchOptions {
        prompt_sizes: prompt_sizes.clone(),
        decode_tokens: args.decode_tokens,
        depths: args.depths.clone(),
        repeats: args.repeats,
        threads,
        profile: args.profile,
        skip,
        ladder: args.ladder,
        seed: args.seed,
        gpu: qwen35::backend::gpu::GpuOptions {
            left_out: args.leave_out.clone(),
            ..args.gpu.options()
        },
    };

    let mut probed: Option<f64> = None;
    let mut backends = Vec::new();
    for &kind in &args.backend {
        let peak = match (args.peak_gbps, kind) {
            (Some(gbps), _) => Peak {
                gbps: Some(gbps),
                source: PeakSource::Given,
            },
            (None, BackendKind::Cpu | BackendKind::CpuFast) => {
                if probed.is_none() {
                    progress.status("measuring the CPU's streaming-read bandwidth");
                    probed = Some(probe_read_gbps(threads).context("bandwidth probe")?);
                }
                Peak {
                    gbps: probed,
                    source: PeakSource::Probe,
                }
            }
            (None, _) => Peak {
                gbps: None,
                source: PeakSource::Unknown,
            },
        };
        let cpu = matches!(kind, BackendKind::Cpu | BackendKind::CpuFast);
        let mut opts = opts.clone();
        if cpu {
            if let Some(sizes) = &args.cpu_prompt_sizes {
                opts.prompt_sizes = sizes.clone();
            }
            opts.decode_tokens = args.cpu_decode_tokens.unwrap_or(opts.decode_tokens);
        }
        backends.push(bench_backend(
            &file,
            kind,
            &opts,
            bytes_per_token,
            peak,
            &mut |event| match event {
                BenchEvent::Starting(text) => progress.status(text),
                BenchEvent::Measured(text) => progress.measured(text),
            },
        ));
    }
    progress.done();

    let report = Report {
        invalid: skip_reason(skip).or_else(|| {
            (!args.leave_out.is_empty()).then(|| {
                format!(
                    "--leave-out {}: those ops did not run, so these are not the model's speeds",
                    args.leave_out.join(",")
                )
            })
        }),
        model,
        file_bytes: file.file_size(),
        weight_bytes_per_token: bytes_per_token,
        threads,
        prompt_sizes,
        decode_tokens: args.decode_tokens,
        depths: args.depths,
        repeats: args.repeats,
        backends,
    };
    print!("{}", render_table(&report));
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, render_svg(&report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    anyhow::ensure!(
        report.backends.iter().any(|b| b.run.is_some()),
        "no backend could run"
    );
    Ok(())
}

/// A microbenchmark over the backend op set, run on whichever backend the user chose.
trait Microbench {
    type Report: Serialize;
    fn run<B: Backend>(&mut self, backend: &B, name: &str) -> anyhow::Result<Self::Report>;
    fn render(report: &Self::Report) -> String;
}

/// Runs `bench` on `kind`, prints its table and writes its JSON to `run.json` if given.
fn run_microbench<M: Microbench>(
    mut bench: M,
    kind: BackendKind,
    run: &MicrobenchRun,
) -> anyhow::Result<()> {
    let report = on_backend(&mut bench, kind, run.threads, &run.gpu)?;
    print!("{}", M::render(&report));
    if let Some(path) = &run.json {
        write_json(path, &report)?;
    }
    Ok(())
}

fn on_backend<M: Microbench>(
    bench: &mut M,
    kind: BackendKind,
    threads: Option<usize>,
    gpu: &GpuArgs,
) -> anyhow::Result<M::Report> {
    match kind {
        BackendKind::Cpu | BackendKind::CpuFast => {
            let mode = if kind == BackendKind::CpuFast {
                CpuMode::Fast
            } else {
                CpuMode::Exact
            };
            let cpu = CpuBackend::with_options(cpu_threads(threads), mode)?;
            bench.run(&cpu, kind.name())
        }
        BackendKind::Wgpu => {
            let gpu = Wgpu::with_options(&gpu.options())?;
            bench.run(&gpu, &format!("wgpu ({})", gpu.adapter_description()))
        }
        BackendKind::Metal => {
            let metal = metal::open(&gpu.options())?;
            bench.run(&metal, &format!("metal ({})", metal.adapter_description()))
        }
    }
}

impl Microbench for GemvOptions {
    type Report = GemvReport;
    fn run<B: Backend>(&mut self, backend: &B, name: &str) -> anyhow::Result<GemvReport> {
        Ok(run_gemv(backend, name, self)?)
    }

    fn render(report: &GemvReport) -> String {
        render_gemv(report)
    }
}

impl Microbench for GemmOptions {
    type Report = GemmReport;
    fn run<B: Backend>(&mut self, backend: &B, name: &str) -> anyhow::Result<GemmReport> {
        let mut progress = Progress::new();
        let report = run_gemm(backend, name, self, &mut |r| {
            progress.measured(&format!(
                "{} {}×{} at P={}: {:.3} ms, {:.1} TFLOP/s",
                r.shape.ty.name(),
                r.shape.rows,
                r.shape.cols,
                r.p,
                r.ms_per_gemm,
                r.tflops
            ))
        })?;
        progress.done();
        Ok(report)
    }

    fn render(report: &GemmReport) -> String {
        render_gemm(report)
    }
}

fn run_gemv_bench(args: GemvArgs) -> anyhow::Result<()> {
    let opts = GemvOptions {
        ty: args.quant,
        rows: args.rows,
        cols: args.cols,
        repeats: args.repeats,
    };
    run_microbench(opts, args.backend, &args.run)
}

fn run_gemm_bench(args: GemmArgs) -> anyhow::Result<()> {
    let opts = GemmOptions {
        shapes: if args.shapes.is_empty() {
            GemmShape::qwen36_27b()
        } else {
            args.shapes
        },
        rows: args.rows,
        repeats: args.repeats,
    };
    run_microbench(opts, args.backend, &args.run)
}

fn run_ttft_bench(args: TtftArgs) -> anyhow::Result<()> {
    let mut progress = Progress::new();
    let (file, label, _temp) = args.source.open(args.seed, &mut progress)?;
    let ctx = args.system_tokens + args.question_tokens + 1;
    let threads = cpu_threads(args.threads);
    let mut engine = load_engine(file, args.backend, threads, ctx)
        .with_context(|| format!("loading {label} on {}", args.backend))?;
    progress.measured(&format!(
        "timing {} cold/restored pairs on {}",
        args.repeats, args.backend
    ));
    let options = TtftOptions {
        system_tokens: args.system_tokens,
        question_tokens: args.question_tokens,
        repeats: args.repeats,
        seed: args.seed,
    };
    let report = time_to_first_token(engine.as_mut(), &options)?;
    progress.done();
    let row = |name: &str, secs: &[f64], spread: qwen35::bench::Spread| {
        let runs: Vec<String> = secs.iter().map(|s| format!("{s:.3}")).collect();
        println!(
            "| {name} | {:.3} | {:.3}–{:.3} | {} |",
            spread.median,
            spread.min,
            spread.max,
            runs.join(" / ")
        );
    };
    println!(
        "time to first token, {label}, {}: a {}-token system prompt and a {}-token question \
         ({} tokens restored, the state {:.1} MiB)",
        args.backend,
        report.system_tokens,
        report.question_tokens,
        report.restored_tokens,
        report.snapshot_bytes as f64 / (1 << 20) as f64
    );
    println!("| prompt | median s | range s | runs s |\n|---|---|---|---|");
    row("cold", &report.cold_secs, report.cold);
    row("restored", &report.restored_secs, report.restored);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// A file in the temp dir, deleted when dropped.
struct TempGguf(PathBuf);

impl Drop for TempGguf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn synthesize(
    preset: Preset,
    quant: Quant,
    seed: u64,
    progress: &mut Progress,
) -> anyhow::Result<TempGguf> {
    let temp = TempGguf(std::env::temp_dir().join(format!(
        "qwen35-bench-{}-{}-{}.gguf",
        std::process::id(),
        preset.name(),
        quant.name()
    )));
    let opts = SynthOptions {
        preset,
        quant,
        seed,
        vocab_from: None,
    };
    write_synthetic(&opts, &temp.0, |written, total| {
        progress.status(&format!(
            "synthesizing {} {}: {:.0}%",
            preset.name(),
            quant.name(),
            100.0 * written as f64 / total.max(1) as f64
        ))
    })
    .with_context(|| format!("writing {}", temp.0.display()))?;
    Ok(temp)
}

fn skip_reason(skip: SkipLayers) -> Option<String> {
    let layers = match skip {
        SkipLayers::None => return None,
        SkipLayers::DeltaNet => "--skip gdn: the Gated DeltaNet layers",
        SkipLayers::Attention => "--skip attn: the full-attention layers",
        SkipLayers::Both => "--skip both: all layers",
    };
    Some(format!(
        "{layers} did not mix tokens, so these are not the model's speeds"
    ))
}

fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Progress on stderr. On a terminal: one status line, overwritten at most every 100 ms, and
/// finished measurements shown in it too. Elsewhere (a log, CI): one line per finished
/// measurement and nothing else, so a long run shows it is alive without filling the log.
struct Progress {
    terminal: bool,
    last: Option<Instant>,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            terminal: std::io::stderr().is_terminal(),
            last: None,
        }
    }

    fn status(&mut self, text: &str) {
        let due = self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if self.terminal && due {
            self.overwrite(text);
        }
    }

    fn measured(&mut self, text: &str) {
        if self.terminal {
            self.overwrite(text);
        } else {
            // Best effort: a closed stderr does not stop a run.
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }

    fn overwrite(&mut self, text: &str) {
        self.last = Some(Instant::now());
        let _ = write!(std::io::stderr(), "\r{text:<72.72}");
    }

    fn done(&mut self) {
        if self.terminal {
            let _ = write!(std::io::stderr(), "\r{:72}\r", "");
        }
    }
}

/// Timings on a software rasterizer (lavapipe, llvmpipe, SwiftShader) measure the CPU running
/// a GPU emulation, not a GPU; and a real-size model there runs for a very long time.
fn warn_of_a_software_rasterizer(small_model: bool) {
    let Ok(adapter) = qwen35::backend::gpu::adapter_info() else {
        return; // bench reports the backend as not run, with the reason.
    };
    if adapter.device_type != wgpu::DeviceType::Cpu {
        return;
    }
    let size = if small_model {
        ""
    } else {
        "; a model beyond the tiny preset will take a very long time here"
    };
    eprintln!(
        "warning: wgpu's adapter here is {}, a software rasterizer running on the CPU: its \
         timings say nothing about a GPU{size}",
        adapter.name
    );
}

fn positive_gbps(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(gbps) if gbps.is_finite() && gbps > 0.0 => Ok(gbps),
        _ => Err("must be a number of GB/s above 0".to_string()),
    }
}

fn parse_skip(name: &str) -> Result<SkipLayers, String> {
    match name {
        "gdn" => Ok(SkipLayers::DeltaNet),
        "attn" => Ok(SkipLayers::Attention),
        "both" => Ok(SkipLayers::Both),
        other => Err(format!(
            "unknown layer kind {other:?} (expected gdn, attn or both)"
        )),
    }
}

/// A ggml type by its name in any case ("q4_k" is q4_K).
/// `TYPE:ROWSxCOLS`, e.g. `q4_k:17408x5120`.
fn parse_gemm_shape(text: &str) -> Result<GemmShape, String> {
    let usage = || format!("{text:?}: expected TYPE:ROWSxCOLS, e.g. q4_k:17408x5120");
    let (ty, dims) = text.split_once(':').ok_or_else(usage)?;
    let (rows, cols) = dims.split_once(['x', '×']).ok_or_else(usage)?;
    let count = |n: &str| at_least_one(n).map_err(|e| format!("{text:?}: {e}"));
    Ok(GemmShape {
        ty: parse_ggml_type(ty)?,
        rows: count(rows)?,
        cols: count(cols)?,
    })
}

fn parse_ggml_type(name: &str) -> Result<GgmlType, String> {
    (0..64)
        .filter_map(GgmlType::from_id)
        .find(|ty| ty.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| format!("unknown ggml type {name:?}"))
}
