//! `qwen35 bench`: the backend comparison benchmark (prefill, decode, roofline, profile) on a
//! model file or a synthetic one, and `qwen35 bench gemv`, the GEMV microbenchmark.

use super::{open_gguf, parse_backend, GpuArgs};
use anyhow::Context;
use clap::{Args, Subcommand};
use qwen35::backend::cpu::{CpuBackend, CpuMode};
use qwen35::backend::gpu::Wgpu;
use qwen35::backend::metal::Metal;
use qwen35::bench::{
    bench_backend, probe_read_gbps, render_gemv, render_svg, render_table, run_gemv,
    weight_bytes_per_token, BenchOptions, GemvOptions, Peak, PeakSource, Report,
};
use qwen35::model::forward::SkipLayers;
use qwen35::model::{BackendKind, Config};
use qwen35::quant::GgmlType;
use qwen35::synth::{write_synthetic, Preset, Quant, SynthOptions};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
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
}

#[derive(Args)]
struct ModelBenchArgs {
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
    /// Backends to compare, comma-separated (cpu, wgpu, metal).
    #[arg(long, value_delimiter = ',', value_parser = parse_backend, default_value = "cpu")]
    backend: Vec<BackendKind>,
    /// Prompt lengths timed for prefill, comma-separated.
    #[arg(short = 'p', long = "prompt", value_delimiter = ',', value_parser = positive, default_value = "512")]
    prompt_sizes: Vec<usize>,
    /// Tokens timed for decode.
    #[arg(short = 'n', long = "decode", value_parser = positive, default_value = "128")]
    decode_tokens: usize,
    /// Prompt lengths for the CPU backends (cpu, cpu-fast) instead of -p: on a large model the
    /// CPU takes minutes per prefill at the sizes a GPU is timed at. Same table, own columns.
    #[arg(long = "cpu-prompt", value_delimiter = ',', value_parser = positive)]
    cpu_prompt_sizes: Option<Vec<usize>>,
    /// Decode tokens for the CPU backends instead of -n.
    #[arg(long = "cpu-decode", value_parser = positive)]
    cpu_decode_tokens: Option<usize>,
    /// Runs of each measurement (the report gives the median and range).
    #[arg(short = 'r', long = "repeats", value_parser = positive, default_value = "3")]
    repeats: usize,
    /// CPU threads (default: all cores); also used by the bandwidth probe.
    #[arg(long)]
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
    /// Leave out the bodies of one kind of layer (gdn or attn); the results are marked INVALID.
    #[arg(long, value_parser = parse_skip)]
    skip: Option<SkipLayers>,
    /// Memory bandwidth in GB/s to hold decode against (default: a streaming-read probe on the
    /// CPU; unknown for GPUs).
    #[arg(long)]
    peak_gbps: Option<f64>,
    /// Seed of the random prompts and of the synthetic weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Args)]
struct GemvArgs {
    /// Weight type (e.g. q4_k, q6_k, q8_0, f16, bf16, f32).
    #[arg(long, value_parser = parse_ggml_type)]
    quant: GgmlType,
    /// Output rows of the matrix.
    #[arg(long, value_parser = positive, default_value = "4096")]
    rows: usize,
    /// Input columns of the matrix (whole blocks of the type).
    #[arg(long, value_parser = positive, default_value = "4096")]
    cols: usize,
    #[arg(long, value_parser = parse_backend, default_value = "cpu")]
    backend: BackendKind,
    /// GEMVs per timing.
    #[arg(short = 'r', long = "repeats", value_parser = positive, default_value = "100")]
    repeats: usize,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    gpu: GpuArgs,
    /// Write the numbers as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.micro {
        Some(Micro::Gemv(gemv)) => run_gemv_bench(gemv),
        None => run_model_bench(args.model),
    }
}

fn run_model_bench(args: ModelBenchArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(all_cores);
    let skip = args.skip.unwrap_or_default();
    let mut progress = Progress::new();
    let (file, model, _temp) = match &args.model {
        Some(path) => (open_gguf(path)?, path.display().to_string(), None),
        None => {
            let preset = args.preset.unwrap_or(Preset::Tiny);
            let temp = synthesize(preset, args.quant, args.seed, &mut progress)?;
            let label = format!(
                "{} {} (synthetic, random weights)",
                preset.name(),
                args.quant.name()
            );
            (open_gguf(&temp.0)?, label, Some(temp))
        }
    };
    let config = Config::from_gguf(&file).context("reading the model's configuration")?;
    let bytes_per_token = weight_bytes_per_token(&file, &config, skip);
    let opts = BenchOptions {
        prompt_sizes: args.prompt_sizes.clone(),
        decode_tokens: args.decode_tokens,
        repeats: args.repeats,
        threads,
        profile: args.profile,
        skip,
        seed: args.seed,
        gpu: args.gpu.options(),
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
                    progress.line("measuring the CPU's streaming-read bandwidth");
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
            &mut |line| progress.line(line),
        ));
    }
    progress.done();

    let report = Report {
        invalid: skip_reason(skip),
        model,
        file_bytes: file.file_size(),
        weight_bytes_per_token: bytes_per_token,
        threads,
        prompt_sizes: args.prompt_sizes,
        decode_tokens: args.decode_tokens,
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

fn run_gemv_bench(args: GemvArgs) -> anyhow::Result<()> {
    let opts = GemvOptions {
        ty: args.quant,
        rows: args.rows,
        cols: args.cols,
        repeats: args.repeats,
    };
    let report = match args.backend {
        BackendKind::Cpu | BackendKind::CpuFast => {
            let mode = if args.backend == BackendKind::CpuFast {
                CpuMode::Fast
            } else {
                CpuMode::Exact
            };
            let cpu = CpuBackend::with_options(args.threads.unwrap_or_else(all_cores), mode)?;
            run_gemv(&cpu, args.backend.name(), &opts)?
        }
        BackendKind::Wgpu => {
            let gpu = Wgpu::with_options(&args.gpu.options())?;
            run_gemv(
                &gpu,
                &format!("wgpu ({})", gpu.adapter_description()),
                &opts,
            )?
        }
        BackendKind::Metal => {
            let metal = Metal::with_options(&args.gpu.options())?;
            run_gemv(
                &metal,
                &format!("metal ({})", metal.adapter_description()),
                &opts,
            )?
        }
    };
    print!("{}", render_gemv(&report));
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
        progress.line(&format!(
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
    };
    Some(format!(
        "{layers} were not run, so these are not the model's speeds"
    ))
}

fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// One line on a terminal's stderr, overwritten at most every 100 ms; nothing when stderr is
/// not a terminal, so logs do not fill with it.
struct Progress {
    enabled: bool,
    last: Option<Instant>,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            last: None,
        }
    }

    fn line(&mut self, text: &str) {
        let due = self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if self.enabled && due {
            self.last = Some(Instant::now());
            // Best effort: a closed stderr does not stop a run.
            let _ = write!(std::io::stderr(), "\r{text:<72.72}");
        }
    }

    fn done(&mut self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r{:72}\r", "");
        }
    }
}

fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a positive whole number")),
    }
}

fn parse_skip(name: &str) -> Result<SkipLayers, String> {
    match name {
        "gdn" => Ok(SkipLayers::DeltaNet),
        "attn" => Ok(SkipLayers::Attention),
        other => Err(format!(
            "unknown layer kind {other:?} (expected gdn or attn)"
        )),
    }
}

/// A ggml type by its name in any case ("q4_k" is q4_K).
fn parse_ggml_type(name: &str) -> Result<GgmlType, String> {
    (0..64)
        .filter_map(GgmlType::from_id)
        .find(|ty| ty.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| format!("unknown ggml type {name:?}"))
}
