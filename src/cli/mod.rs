//! Subcommands and the flags they share.

mod bench;
mod chat;
mod check;
mod eval;
mod info;
mod run;
mod synth;
mod tokenize;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use qwen35::backend::gpu::GpuOptions;
use qwen35::backend::BackendOptions;
use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine_with, BackendKind, Engine};
use qwen35::sample::SamplerConfig;
use qwen35::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "qwen35",
    version,
    about = "Inference for Qwen3.5 / Qwen3.6 GGUF models (arch qwen35)"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Architecture, hyper-parameters, tensor types and memory needs of a GGUF file.
    Info(info::InfoArgs),
    /// Token ids of a text, or (--decode) the text of token ids.
    Tokenize(tokenize::TokenizeArgs),
    /// One prompt, one streamed completion; prefill and decode speed on stderr.
    Run(run::RunArgs),
    /// Interactive multi-turn chat (ChatML), state kept between turns.
    Chat(chat::ChatArgs),
    /// Teacher-forced logits of a token sequence, dumped as .npy and/or compared to a reference.
    Eval(eval::EvalArgs),
    /// Every backend on this machine against the reference, on the bundled fixture or a model.
    Check(check::CheckArgs),
    /// Write a random-weight GGUF with the real shapes and tensor types of a Qwen3.5/3.6 size.
    Synth(synth::SynthArgs),
    /// Backend comparison benchmark.
    Bench(bench::BenchArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Run(args) => run::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Check(args) => check::run(args),
        Command::Synth(args) => synth::run(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// Flags of every subcommand that runs the model.
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// GGUF model file.
    #[arg(short, long)]
    pub model: PathBuf,
    /// Who runs the ops: cpu (exact), cpu-fast (8-bit activations), wgpu or metal (default:
    /// the fastest here, wgpu on a GPU, else cpu-fast; named on stderr).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
    /// Context length in tokens (default: the model's, capped at 8192).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// Settings of the GPU backends (wgpu, metal); the defaults are the fast path.
#[derive(Args, Clone)]
pub struct GpuArgs {
    /// Cap on the bytes allocated on the GPU: an allocation past it fails as out of memory.
    #[arg(long, value_name = "BYTES")]
    pub gpu_memory_limit: Option<u64>,
    /// Decode GEMVs on f32 activations instead of 14-bit integers (to compare).
    #[arg(long)]
    pub f32_gemv: bool,
    /// Prefill GEMMs in f32 tiles even where the GPU has cooperative matrices (to compare).
    #[arg(long)]
    pub no_cooperative_matrix: bool,
    /// Every runtime check in the kernels (loop bounds, integer division), not only buffer bounds.
    #[arg(long)]
    pub all_shader_checks: bool,
}

impl GpuArgs {
    pub fn options(&self) -> GpuOptions {
        GpuOptions {
            memory_limit: self.gpu_memory_limit,
            integer_gemv: !self.f32_gemv,
            cooperative_matrix: !self.no_cooperative_matrix,
            all_shader_checks: self.all_shader_checks,
            ..GpuOptions::default()
        }
    }
}

/// Sampling flags.
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.7)]
    pub temp: f32,
    #[arg(long, default_value_t = 20)]
    pub top_k: usize,
    #[arg(long, default_value_t = 0.8)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Random seed (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl SamplingArgs {
    pub fn config(&self) -> SamplerConfig {
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
        SamplerConfig {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            seed,
            ..SamplerConfig::default()
        }
    }
}

fn parse_backend(name: &str) -> Result<BackendKind, String> {
    name.parse::<BackendKind>().map_err(|e| e.to_string())
}

pub fn open_gguf(path: &Path) -> anyhow::Result<Arc<GgufFile>> {
    let file = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Arc::new(file))
}

pub fn load_tokenizer(file: &GgufFile, path: &Path) -> anyhow::Result<Tokenizer> {
    Tokenizer::from_gguf(file)
        .with_context(|| format!("building the tokenizer of {}", path.display()))
}

/// Opens the model file, builds its tokenizer and loads it on the chosen backend.
pub fn load(args: &EngineArgs) -> anyhow::Result<(Tokenizer, Box<dyn Engine>)> {
    let file = open_gguf(&args.model)?;
    let tokenizer = load_tokenizer(&file, &args.model)?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let backend = args.backend.unwrap_or_else(|| {
        let (fastest, why) = BackendKind::fastest_available();
        eprintln!(
            "backend: {fastest}, the fastest here ({why}); --backend cpu is the exact reference"
        );
        fastest
    });
    let started = std::time::Instant::now();
    let ctx = args.ctx.unwrap_or(DEFAULT_CTX);
    let options = BackendOptions {
        threads,
        gpu: args.gpu.options(),
    };
    let engine = load_engine_with(file, backend, &options, ctx)
        .with_context(|| format!("loading {}", args.model.display()))?;
    log::info!("loaded in {:.2} s", started.elapsed().as_secs_f64());
    Ok((tokenizer, engine))
}

/// Token ids separated by whitespace or commas.
pub fn parse_token_ids(text: &str) -> anyhow::Result<Vec<u32>> {
    text.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .with_context(|| format!("'{s}' is not a token id"))
        })
        .collect()
}

const DEFAULT_CTX: usize = 8192;
