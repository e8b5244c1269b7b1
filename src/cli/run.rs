//! `qwen35 run`: one prompt, one streamed completion.

use super::{load, EngineArgs, SamplingArgs};
use anyhow::Context;
use clap::Args;
use qwen35::chat::{render_prompt, Message, Role};
use qwen35::generate::{generate, Limits};
use qwen35::sample::Sampler;
use std::io::Write;
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
    #[arg(short = 'n', long, default_value_t = 256)]
    n_predict: usize,
    /// Wrap the prompt as one ChatML user turn.
    #[arg(long)]
    chat: bool,
    /// With --chat: let the model think first (default off for one-shot runs).
    #[arg(long, requires = "chat")]
    think: bool,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let (tokenizer, mut engine) = load(&args.engine)?;
    let text = if args.chat {
        render_prompt(
            &[Message {
                role: Role::User,
                content: args.prompt.clone(),
            }],
            args.think,
        )
    } else {
        args.prompt.clone()
    };
    let prompt = tokenizer
        .encode(&text, true)
        .context("tokenizing the prompt")?;
    anyhow::ensure!(!prompt.is_empty(), "the prompt is empty");
    let mut sampler = Sampler::new(args.sampling.config());
    let never = AtomicBool::new(false);
    let mut stdout = std::io::stdout();
    let generation = generate(
        engine.as_mut(),
        &tokenizer,
        &mut sampler,
        &prompt,
        &mut Vec::new(),
        Limits {
            max_new_tokens: args.n_predict,
            interrupt: &never,
        },
        |piece| {
            // A closed stdout (e.g. `| head`) must not abort generation with a panic.
            let _ = stdout.write_all(piece.as_bytes());
            let _ = stdout.flush();
        },
    )?;
    println!();
    eprintln!(
        "{} [stop: {:?}]",
        generation.speed_report(),
        generation.stop
    );
    Ok(())
}
