//! `qwen35 chat`: interactive multi-turn ChatML chat. The model state is kept between turns, so
//! each turn prefills only its own new tokens; Ctrl-C stops a reply, not the session.

use super::generate::{generate, Limits, StopReason};
use super::{load, EngineArgs, SamplingArgs};
use anyhow::Context;
use clap::Args;
use qwen35::chat::{render_prompt, render_turn, Message, Role};
use qwen35::sample::Sampler;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// A system prompt for the conversation.
    #[arg(long)]
    system: Option<String>,
    /// Let the model reason in a <think> block before answering (the default).
    #[arg(long, overrides_with = "no_think")]
    think: bool,
    /// Answer directly, without a reasoning block.
    #[arg(long = "no-think")]
    no_think: bool,
    /// Do not print the reasoning block (it is still generated when thinking is on).
    #[arg(long)]
    hide_thinking: bool,
    /// Most tokens per reply.
    #[arg(short = 'n', long, default_value_t = 4096)]
    n_predict: usize,
}

/// Whether a reply is being generated; decides what Ctrl-C does.
struct Interrupt {
    generating: AtomicBool,
    requested: AtomicBool,
}

pub fn run(args: ChatArgs) -> anyhow::Result<()> {
    let thinking = !args.no_think;
    let (tokenizer, mut engine) = load(&args.engine)?;
    let im_end = tokenizer
        .id_of("<|im_end|>")
        .context("the vocabulary has no <|im_end|> token, so it cannot chat in ChatML")?;

    let interrupt = Arc::new(Interrupt {
        generating: AtomicBool::new(false),
        requested: AtomicBool::new(false),
    });
    let handler_state = Arc::clone(&interrupt);
    ctrlc::set_handler(move || {
        if handler_state.generating.load(Ordering::SeqCst) {
            handler_state.requested.store(true, Ordering::SeqCst);
        } else {
            eprintln!();
            std::process::exit(130);
        }
    })
    .context("installing the Ctrl-C handler")?;

    let mut sampler = Sampler::new(args.sampling.config());
    let mut history: Vec<u32> = Vec::new();
    // Tokens that close the previous reply and must precede the next turn.
    let mut pending: Vec<u32> = Vec::new();
    eprintln!(
        "chat: thinking {}; /reset starts over, /quit or Ctrl-D leaves, Ctrl-C stops a reply",
        if thinking { "on" } else { "off" }
    );
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        match line.trim() {
            "" => continue,
            "/quit" | "/exit" => break,
            "/reset" => {
                engine.reset();
                history.clear();
                pending.clear();
                eprintln!("(conversation reset)");
                continue;
            }
            _ => {}
        }

        let text = if engine.position() == 0 {
            let mut messages = Vec::new();
            if let Some(system) = &args.system {
                messages.push(Message {
                    role: Role::System,
                    content: system.clone(),
                });
            }
            messages.push(Message {
                role: Role::User,
                content: line.to_string(),
            });
            render_prompt(&messages, thinking)
        } else {
            render_turn(line, thinking)
        };
        let mut prompt = std::mem::take(&mut pending);
        prompt.extend(tokenizer.encode(&text, true)?);
        if engine.position() + prompt.len() >= engine.context_len() {
            eprintln!(
                "(the context is full: {} of {} positions used; /reset to start a new conversation)",
                engine.position(),
                engine.context_len()
            );
            continue;
        }

        let mut display = ReplyDisplay::new(thinking, args.hide_thinking);
        interrupt.requested.store(false, Ordering::SeqCst);
        interrupt.generating.store(true, Ordering::SeqCst);
        let result = generate(
            engine.as_mut(),
            &tokenizer,
            &mut sampler,
            &prompt,
            &mut history,
            Limits {
                max_new_tokens: args.n_predict,
                interrupt: &interrupt.requested,
            },
            |piece| {
                let _ = stdout.write_all(display.filter(piece).as_bytes());
                let _ = stdout.flush();
            },
        );
        interrupt.generating.store(false, Ordering::SeqCst);
        let generation = result?;
        println!();
        match generation.stop {
            StopReason::Interrupted => eprintln!("(stopped)"),
            StopReason::ContextFull => {
                eprintln!("(the context is full; /reset to start a new conversation)")
            }
            StopReason::Budget => eprintln!("(reply cut at {} tokens)", args.n_predict),
            StopReason::EndOfGeneration(_) => {}
        }
        log::info!("{}", generation.speed_report());
        // Close the reply with <|im_end|> in the model's state, whatever stopped it.
        pending.extend(
            generation
                .unfed
                .filter(|t| !tokenizer.eos_ids().contains(t)),
        );
        pending.push(im_end);
    }
    Ok(())
}

/// Hides the reasoning block from the stream when asked to.
struct ReplyDisplay {
    hide: bool,
    in_reasoning: bool,
}

impl ReplyDisplay {
    fn new(thinking: bool, hide_thinking: bool) -> ReplyDisplay {
        // With thinking on, the prompt already opened the <think> block.
        ReplyDisplay {
            hide: hide_thinking,
            in_reasoning: thinking,
        }
    }

    fn filter(&mut self, piece: &str) -> String {
        if !self.hide {
            return piece.to_string();
        }
        if self.in_reasoning {
            match piece.find("</think>") {
                Some(end) => {
                    self.in_reasoning = false;
                    piece[end + "</think>".len()..].trim_start().to_string()
                }
                None => String::new(),
            }
        } else {
            piece.to_string()
        }
    }
}
