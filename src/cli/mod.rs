//! Subcommands and the flags they share.

mod bench;
mod chat;
mod check;
mod convert;
mod eval;
mod info;
mod perplexity;
mod quantize;
mod run;
mod serve;
mod synth;
mod tokenize;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use qwen35::backend::gpu::{GpuOptions, WeightCopies};
use qwen35::backend::BackendOptions;
use qwen35::chat::ChatTemplate;
use qwen35::gguf::{GgufError, GgufFile};
use qwen35::model::{load_engine_with, BackendKind, Engine};
use qwen35::sample::SamplerConfig;
use qwen35::state_file::{ModelIdentity, PromptCacheFile};
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
    /// Interactive multi-turn chat through the model's chat template; each turn prefills only
    /// what the state cache does not hold.
    Chat(chat::ChatArgs),
    /// Teacher-forced logits of a token sequence, dumped as .npy and/or compared to a reference.
    Eval(eval::EvalArgs),
    /// Every backend on this machine against the reference, on the bundled fixture or a model.
    Check(check::CheckArgs),
    /// Write a random-weight GGUF with the real shapes and tensor types of a Qwen3.5/3.6 size.
    Synth(synth::SynthArgs),
    /// Backend comparison benchmark.
    Bench(bench::BenchArgs),
    /// Convert a Hugging Face Qwen3.5/3.6 checkpoint to GGUF, as llama.cpp's converter does.
    Convert(convert::ConvertArgs),
    /// Quantize an F32/F16/BF16 GGUF with llama-quantize's per-tensor types and ggml's quantizers.
    Quantize(quantize::QuantizeArgs),
    /// Perplexity of a text file, measured as llama.cpp's llama-perplexity measures it.
    Perplexity(perplexity::PerplexityArgs),
    /// An OpenAI-compatible HTTP server (chat and text completions, streaming, a state cache).
    Serve(serve::ServeArgs),
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
        Command::Convert(args) => convert::run(args),
        Command::Quantize(args) => quantize::run(args),
        Command::Perplexity(args) => perplexity::run(args),
        Command::Serve(args) => serve::run(args),
    }
}

/// Flags of every subcommand that runs the model.
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// GGUF model file (default: the small model bundled in models/, see models/README.md).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Who runs the ops: cpu (exact), cpu-fast (14-bit activations), wgpu or metal (default:
    /// the fastest here, wgpu on a GPU, else cpu-fast; named on stderr).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
    /// Context length in tokens (default: 8192).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one)]
    pub ctx: Option<usize>,
    /// CPU threads (default: all cores; more than the cores are cut to the cores).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// Settings of the GPU backends (wgpu, metal); the defaults are the fast path.
#[derive(Args, Clone)]
pub struct GpuArgs {
    /// Cap on the bytes allocated on the GPU: an allocation past it fails as out of memory.
    #[arg(long, value_name = "BYTES", env = "QWEN35_GPU_MEMORY_LIMIT")]
    pub gpu_memory_limit: Option<u64>,
    /// Decode GEMVs on f32 activations instead of 14-bit integers (to compare).
    #[arg(long)]
    pub f32_gemv: bool,
    /// Prefill GEMMs in f32 tiles even where the GPU has cooperative matrices (to compare); the
    /// delta rule then runs in f32 too.
    #[arg(long)]
    pub no_cooperative_matrix: bool,
    /// With --chunked-delta-rule (or where the GPU's subgroups do not fit the scan), the chunks'
    /// products on cooperative matrices (f16) where the GPU has them (to compare: no faster than
    /// the f32 chunks).
    #[arg(long)]
    pub cooperative_delta_rule: bool,
    /// The delta rule of a prefill by chunks even where the GPU's subgroups allow one scan per
    /// state column (to compare).
    #[arg(long)]
    pub chunked_delta_rule: bool,
    /// Prefill attention in f32 even where the GPU has cooperative matrices (to compare).
    #[arg(long)]
    pub no_cooperative_attention: bool,
    /// Every runtime check in the kernels (loop bounds, integer division), not only buffer bounds.
    #[arg(long)]
    pub all_shader_checks: bool,
    /// Decode attention by query head at every depth, each re-reading its kv head's cache rows
    /// (to compare; by default only caches of up to 1024 rows).
    #[arg(long)]
    pub per_head_attention: bool,
    /// KV caches in f16 on the GPU: half their memory, for long contexts (decode ran 4% slower
    /// at a short context on an H100).
    #[arg(long)]
    pub f16_kv_cache: bool,
    /// Q6_K blocks on the GPU as the file lays them out (210 bytes) instead of padded to whole
    /// words (212 bytes, so that the Q6_K kernels read whole words; to compare).
    #[arg(long)]
    pub q6_k_file_layout: bool,
    /// GPU memory for keeping the weights' f16 copies for the prefill GEMM (tensor cores only)
    /// after the first prefill, so that later prefills skip decoding them; a copy is about two
    /// bytes per weight (49 GB for all of a 27B model's). `auto` (the default): copies while
    /// this program's use of the GPU stays within 80% of the memory the driver says it may use
    /// (Vulkan; elsewhere none); a number: at most that many bytes; 0: none. Whenever the GPU
    /// runs out of memory with copies kept, they are all let go.
    #[arg(long, value_name = "auto|BYTES", default_value = "auto", value_parser = weight_copies)]
    pub f16_weight_copies: WeightCopies,
}

/// The bundled default model, found where this program was built from.
const DEFAULT_MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/models/qwen35-default-q8_0.gguf"
);

impl EngineArgs {
    /// The model file: `--model`, else the bundled default model.
    pub fn model(&self) -> &Path {
        self.model.as_deref().unwrap_or(Path::new(DEFAULT_MODEL))
    }
}

impl GpuArgs {
    pub fn options(&self) -> GpuOptions {
        GpuOptions {
            memory_limit: self.gpu_memory_limit,
            integer_gemv: !self.f32_gemv,
            cooperative_matrix: !self.no_cooperative_matrix,
            cooperative_delta_rule: self.cooperative_delta_rule,
            chunked_delta_rule: self.chunked_delta_rule,
            cooperative_attention: !self.no_cooperative_attention,
            all_shader_checks: self.all_shader_checks,
            per_head_attention: self.per_head_attention,
            f16_kv_cache: self.f16_kv_cache,
            q6_k_aligned: !self.q6_k_file_layout,
            f16_weight_copies: self.f16_weight_copies,
            ..GpuOptions::default()
        }
    }
}

/// Sampling flags, each refused outside its range.
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Temperature, at least 0; 0 is greedy.
    #[arg(long, default_value_t = 0.7, allow_negative_numbers = true, value_parser = temperature)]
    pub temp: f32,
    /// Keep only the k most likely tokens; 0 keeps all.
    #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = top_k)]
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities sum to p, above 0 and at most 1; 1 keeps all.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true, value_parser = top_p)]
    pub top_p: f32,
    /// Drop tokens less likely than min-p times the most likely one, 0 to 1; 0 keeps all.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = min_p)]
    pub min_p: f32,
    /// Divide the logits of recent tokens by this (multiply the negative ones), above 0; 1 is off.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = repeat_penalty)]
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

/// A finite number within the range `accepts`, which `range` describes for the message.
fn number_in(text: &str, range: &str, accepts: impl Fn(f32) -> bool) -> Result<f32, String> {
    match text.trim().parse::<f32>() {
        Ok(x) if x.is_finite() && accepts(x) => Ok(x),
        _ => Err(format!("must be a number {range}")),
    }
}

fn weight_copies(text: &str) -> Result<WeightCopies, String> {
    match text {
        "auto" => Ok(WeightCopies::Auto),
        bytes => bytes
            .parse()
            .map(WeightCopies::Bytes)
            .map_err(|_| "must be `auto` or a whole number of bytes".to_string()),
    }
}

fn temperature(text: &str) -> Result<f32, String> {
    number_in(text, "of at least 0 (0 is greedy)", |t| t >= 0.0)
}

fn top_k(text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| "must be a whole number of at least 0 (0 keeps all)".to_string())
}

fn top_p(text: &str) -> Result<f32, String> {
    number_in(text, "above 0 and at most 1", |p| p > 0.0 && p <= 1.0)
}

fn min_p(text: &str) -> Result<f32, String> {
    number_in(text, "from 0 to 1", |p| (0.0..=1.0).contains(&p))
}

fn repeat_penalty(text: &str) -> Result<f32, String> {
    number_in(text, "above 0 (1 is off)", |p| p > 0.0)
}

/// A count that must be at least one (tokens, threads, context positions, runs).
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("must be a whole number of at least 1".to_string()),
    }
}

/// The CPU threads to use: all cores by default, and never more than the cores, since threads
/// beyond them only take turns on the cores and wait for each other at every op.
pub fn cpu_threads(requested: Option<usize>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match requested {
        Some(n) if n > cores => {
            eprintln!("warning: --threads {n} is more than the {cores} cores here; using {cores}");
            cores
        }
        Some(n) => n,
        None => cores,
    }
}

fn parse_backend(name: &str) -> Result<BackendKind, String> {
    name.parse::<BackendKind>().map_err(|e| e.to_string())
}

pub fn open_gguf(path: &Path) -> anyhow::Result<Arc<GgufFile>> {
    match GgufFile::open(path) {
        Ok(file) => Ok(Arc::new(file)),
        // It names the path already.
        Err(e @ GgufError::Io { .. }) => Err(e.into()),
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
    }
}

/// A UTF-8 text file less one final newline, as llama-perplexity reads its `-f` file.
pub fn read_text_file(path: &Path) -> anyhow::Result<String> {
    let mut text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}

pub fn load_tokenizer(file: &GgufFile, path: &Path) -> anyhow::Result<Tokenizer> {
    Tokenizer::from_gguf(file)
        .with_context(|| format!("building the tokenizer of {}", path.display()))
}

/// Opens the model file, builds its tokenizer and loads it on the chosen backend.
pub fn load(args: &EngineArgs) -> anyhow::Result<(Tokenizer, Box<dyn Engine>)> {
    if args.model.is_none() {
        // Once, though `run --prefill-backend` loads the model twice.
        static NOTICE: std::sync::Once = std::sync::Once::new();
        NOTICE.call_once(|| {
            eprintln!("model: no -m given, using the bundled default model {DEFAULT_MODEL}")
        });
    }
    let file = open_gguf(args.model())?;
    let tokenizer = load_tokenizer(&file, args.model())?;
    Ok((tokenizer, load_engine_from(args, file)?))
}

/// Loads the opened model file on the backend `args` name (the fastest here, named on stderr,
/// when they name none).
pub fn load_engine_from(args: &EngineArgs, file: Arc<GgufFile>) -> anyhow::Result<Box<dyn Engine>> {
    let threads = cpu_threads(args.threads);
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
        .with_context(|| format!("loading {}", args.model().display()))?;
    log::info!("loaded in {:.2} s", started.elapsed().as_secs_f64());
    Ok(engine)
}

/// The chat template of the model file (ChatML when it has none).
pub fn load_chat_template(path: &Path) -> anyhow::Result<ChatTemplate> {
    let file = open_gguf(path)?;
    ChatTemplate::from_gguf(&file)
        .with_context(|| format!("reading the chat template of {}", path.display()))
}

/// `--prompt-cache FILE` for the model at `model` (its identity read from the file's header).
pub fn prompt_cache_file(
    path: Option<&PathBuf>,
    model: &Path,
) -> anyhow::Result<Option<PromptCacheFile>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let file = open_gguf(model)?;
    Ok(Some(PromptCacheFile {
        path: path.clone(),
        identity: ModelIdentity::of(&file),
    }))
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

/// A progress bar on stderr for a job measured in bytes, with the current item as its message.
pub fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {wide_msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// "3 q4_K, 2 q6_K": a file's tensor count per type.
pub fn type_summary(counts: &std::collections::BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = counts
        .iter()
        .map(|(name, count)| format!("{count} {name}"))
        .collect();
    parts.join(", ")
}
