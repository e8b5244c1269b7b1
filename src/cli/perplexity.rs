//! `qwen35 perplexity`: the perplexity of a text file, as llama.cpp's `llama-perplexity` measures
//! it (see `qwen35::perplexity`); progress on stderr, the result on stdout.

use super::{load_engine_from, load_tokenizer, open_gguf, read_text_file, EngineArgs};
use anyhow::Context;
use clap::Args;
use qwen35::gguf::GgufFile;
use qwen35::model::Config;
use qwen35::perplexity::{measure, Estimate, Plan};
use std::path::PathBuf;
use std::time::Instant;

/// llama-perplexity's default chunk size.
const DEFAULT_CHUNK: usize = 512;

#[derive(Args)]
#[command(mut_arg("ctx", |a| a.help(
    "Tokens per chunk; the second half of each is scored (default: 512, as llama-perplexity's)"
)))]
pub struct PerplexityArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// The text file to measure (UTF-8; one final newline is dropped, as llama-perplexity does).
    #[arg(short = 'f', long)]
    file: PathBuf,
    /// Measure at most this many chunks (default: every whole chunk of the text).
    #[arg(long, allow_negative_numbers = true, value_parser = super::at_least_one)]
    chunks: Option<usize>,
}

pub fn run(args: PerplexityArgs) -> anyhow::Result<()> {
    let text = read_text_file(&args.file)?;
    let file = open_gguf(args.engine.model())?;
    let config = Config::from_gguf(&file)
        .with_context(|| format!("reading {}", args.engine.model().display()))?;
    let tokenizer = load_tokenizer(&file, args.engine.model())?;
    let bos =
        added_bos(&file).with_context(|| format!("reading {}", args.engine.model().display()))?;
    let mut tokens: Vec<u32> = bos.into_iter().collect();
    tokens.extend(
        tokenizer
            .encode(&text, false)
            .with_context(|| format!("tokenizing {}", args.file.display()))?,
    );
    let ctx = args.engine.ctx.unwrap_or(DEFAULT_CHUNK);
    let plan = Plan::new(tokens.len(), ctx, args.chunks, config.train_context)
        .with_context(|| format!("measuring {}", args.file.display()))?;
    eprintln!(
        "{}: {} tokens; {} chunks of {ctx}, {} tokens scored in each",
        args.file.display(),
        tokens.len(),
        plan.chunks,
        plan.scored_per_chunk()
    );
    // The engine's context only has to hold one chunk.
    let engine_args = EngineArgs {
        ctx: Some(ctx),
        ..args.engine
    };
    let mut engine = load_engine_from(&engine_args, file)?;
    let progress = Progress::new(plan.chunks);
    let estimate = measure(engine.as_mut(), &tokens, plan, bos, |chunk, running| {
        progress.chunk_done(chunk, running)
    })?;
    progress.finish();
    println!(
        "Final estimate: PPL = {:.4} +/- {:.5}",
        estimate.ppl, estimate.error
    );
    Ok(())
}

/// The BOS id when the vocabulary asks for one in front of a text (`tokenizer.ggml.add_bos_token`,
/// false when absent, as llama.cpp reads it for Qwen vocabularies).
fn added_bos(file: &GgufFile) -> anyhow::Result<Option<u32>> {
    if !file
        .get_bool_opt("tokenizer.ggml.add_bos_token")?
        .unwrap_or(false)
    {
        return Ok(None);
    }
    let id = file.get_u32_opt("tokenizer.ggml.bos_token_id")?.context(
        "tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is missing",
    )?;
    Ok(Some(id))
}

/// Each chunk's running estimate on stderr: over a bar with an ETA on a terminal, else one line
/// per chunk.
struct Progress {
    bar: indicatif::ProgressBar,
    started: Instant,
}

impl Progress {
    fn new(chunks: usize) -> Progress {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(chunks as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} chunks, eta {eta} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Progress {
            bar,
            started: Instant::now(),
        }
    }

    fn chunk_done(&self, chunk: usize, running: Estimate) {
        let line = format!(
            "[{}]{:.4} ({} tokens, {:.1} s)",
            chunk + 1,
            running.ppl,
            running.tokens,
            self.started.elapsed().as_secs_f64()
        );
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
            self.bar.set_message(format!("PPL {:.4}", running.ppl));
            self.bar.inc(1);
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
