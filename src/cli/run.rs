//! `qwen35 run`: one prompt, one streamed completion.

use super::{
    at_least_one, load, load_chat_template, parse_backend, prompt_cache_file, EngineArgs,
    SamplingArgs,
};
use anyhow::Context;
use clap::Args;
use qwen35::chat::{tokenize_at_boundaries, Message, RenderOptions, Role};
use qwen35::generate::{generate, Limits};
use qwen35::model::BackendKind;
use qwen35::prefix_cache::{prefill_boundaries, PrefixCache};
use qwen35::sample::Sampler;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// The prompt text (special tokens such as <|im_start|> are parsed).
    #[arg(short, long)]
    prompt: String,
    /// Most tokens to generate.
    #[arg(short = 'n', long, default_value_t = 256, allow_negative_numbers = true, value_parser = at_least_one)]
    n_predict: usize,
    /// Wrap the prompt as one user turn through the model's chat template.
    #[arg(long)]
    chat: bool,
    /// With --chat: let the model think first (default off for one-shot runs).
    #[arg(long, requires = "chat")]
    think: bool,
    /// A state file: the state after the prompt but its last token is saved there, and a later
    /// run whose prompt extends the saved tokens restores it instead of prefilling them. A file
    /// saved for another model, or truncated or corrupted, is refused.
    #[arg(long)]
    prompt_cache: Option<PathBuf>,
    /// Prefill on this backend, then move the state to --backend to decode (e.g.
    /// --prefill-backend wgpu --backend cpu).
    #[arg(long, value_parser = parse_backend)]
    prefill_backend: Option<BackendKind>,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let (tokenizer, mut engine) = load(&args.engine)?;
    let prompt_file = prompt_cache_file(args.prompt_cache.as_ref(), args.engine.model())?;
    let (prompt, mut boundaries) = if args.chat {
        let (text, byte_boundaries) = load_chat_template(args.engine.model())?
            .render_with_boundaries(
                &[Message::new(Role::User, args.prompt.clone())],
                &RenderOptions::generation(args.think),
            )?;
        tokenize_at_boundaries(&tokenizer, &text, &byte_boundaries)
    } else {
        tokenizer
            .encode(&args.prompt, true)
            .map(|t| (t, Vec::new()))
    }
    .context("tokenizing the prompt")?;
    anyhow::ensure!(!prompt.is_empty(), "the prompt is empty");
    let mut cache = PrefixCache::new(if prompt_file.is_some() { usize::MAX } else { 0 });
    if let Some(file) = &prompt_file {
        file.load_into(&mut cache)?;
    }
    if prompt_file.is_some() || args.prefill_backend.is_some() {
        // The state before the last token: the one a repeated or longer prompt can use, and
        // the one handed from the prefill backend to the decoding one.
        boundaries.push(prompt.len() - 1);
    }
    // Prefilled in the same pieces as the server and `chat` feed it, so the logits are theirs.
    let prefilled = match args.prefill_backend {
        Some(backend) => {
            let prefill_args = EngineArgs {
                backend: Some(backend),
                ..args.engine.clone()
            };
            let (_, mut prefiller) = load(&prefill_args)?;
            let prefilled =
                prefill_boundaries(prefiller.as_mut(), &mut cache, &prompt, &boundaries)?;
            engine.restore(&prefiller.snapshot()?).with_context(|| {
                format!("moving the state from {backend} to the decoding backend")
            })?;
            prefilled
        }
        None => prefill_boundaries(engine.as_mut(), &mut cache, &prompt, &boundaries)?,
    };
    if let Some(file) = &prompt_file {
        eprintln!(
            "prompt cache: {} of {} prompt tokens restored from {}",
            prefilled.cached,
            prompt.len(),
            file.path.display()
        );
        file.save_from(&cache)?;
    }
    let mut sampler = Sampler::new(args.sampling.config());
    let never = AtomicBool::new(false);
    let mut stdout = std::io::stdout();
    let generation = generate(
        engine.as_mut(),
        &tokenizer,
        &mut sampler,
        &prompt[prefilled.position..],
        &mut prompt[..prefilled.position].to_vec(),
        Limits {
            max_new_tokens: args.n_predict,
            interrupt: &never,
        },
        |piece| {
            // A closed stdout (e.g. `| head`) must not abort generation with a panic.
            let _ = stdout.write_all(piece.as_bytes());
            let _ = stdout.flush();
            ControlFlow::Continue(())
        },
    )?;
    println!();
    eprintln!("{} [stop: {}]", generation.speed_report(), generation.stop);
    Ok(())
}
