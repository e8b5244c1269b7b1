//! `qwen35 chat`: interactive multi-turn ChatML chat. The model state is kept between turns, so
//! each turn prefills only its own new tokens. Ctrl-C stops a reply, not the session; during
//! the load, or at the prompt, it leaves with status 130. When the context fills up the user
//! chooses between a fresh context (the system prompt is kept and prefilled again) and stopping.

use super::{load, EngineArgs, SamplingArgs};
use anyhow::Context;
use clap::Args;
use qwen35::chat::{render_prompt, render_turn, Message, Role};
use qwen35::generate::{generate, Limits, StopReason};
use qwen35::model::Engine;
use qwen35::sample::Sampler;
use qwen35::tokenizer::Tokenizer;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
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

/// Exit status after Ctrl-C outside a reply (128 + SIGINT, as shells report it).
const INTERRUPTED_STATUS: i32 = 130;

/// What the session is doing, which decides what Ctrl-C does.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    Loading,
    Prompting,
    Replying,
}

struct Interrupt {
    phase: AtomicU8,
    /// Set by Ctrl-C during a reply; the generation loop stops at the next token.
    stop_reply: AtomicBool,
}

impl Interrupt {
    /// Installs the Ctrl-C handler; the session starts in the loading phase.
    fn install() -> anyhow::Result<Arc<Interrupt>> {
        let interrupt = Arc::new(Interrupt {
            phase: AtomicU8::new(Phase::Loading as u8),
            stop_reply: AtomicBool::new(false),
        });
        let handler_state = Arc::clone(&interrupt);
        ctrlc::set_handler(move || {
            let phase = handler_state.phase.load(Ordering::SeqCst);
            if phase == Phase::Replying as u8 {
                handler_state.stop_reply.store(true, Ordering::SeqCst);
                return;
            }
            if phase == Phase::Loading as u8 {
                eprintln!("\ninterrupted while loading the model");
            } else {
                eprintln!();
            }
            std::process::exit(INTERRUPTED_STATUS);
        })
        .context("installing the Ctrl-C handler")?;
        Ok(interrupt)
    }

    fn enter(&self, phase: Phase) {
        if phase == Phase::Replying {
            self.stop_reply.store(false, Ordering::SeqCst);
        }
        self.phase.store(phase as u8, Ordering::SeqCst);
    }
}

/// One conversation in the model's context.
struct Conversation {
    engine: Box<dyn Engine>,
    tokenizer: Tokenizer,
    system: Option<String>,
    thinking: bool,
    /// The tokens the repeat penalty may look at.
    history: Vec<u32>,
    /// Tokens that close the previous reply and must precede the next turn.
    pending: Vec<u32>,
}

impl Conversation {
    /// The tokens that ask `line`: the system prompt and the message in an empty context, else
    /// the close of the last reply and the next turn.
    fn prompt_for(&self, line: &str) -> anyhow::Result<Vec<u32>> {
        if self.engine.position() == 0 {
            let mut messages = Vec::new();
            if let Some(system) = &self.system {
                messages.push(Message::new(Role::System, system.clone()));
            }
            messages.push(Message::new(Role::User, line));
            return Ok(self
                .tokenizer
                .encode(&render_prompt(&messages, self.thinking), true)?);
        }
        let mut prompt = self.pending.clone();
        prompt.extend(
            self.tokenizer
                .encode(&render_turn(line, self.thinking), true)?,
        );
        Ok(prompt)
    }

    /// Whether `prompt` fits with room for at least one reply token.
    fn fits(&self, prompt: &[u32]) -> bool {
        self.engine.position() + prompt.len() < self.engine.context_len()
    }

    /// An empty context; the next turn prefills the system prompt again.
    fn start_fresh(&mut self) {
        self.engine.reset();
        self.history.clear();
        self.pending.clear();
    }

    fn context_report(&self) -> String {
        format!(
            "{} of {} positions used",
            self.engine.position(),
            self.engine.context_len()
        )
    }
}

pub fn run(args: ChatArgs) -> anyhow::Result<()> {
    let interrupt = Interrupt::install()?;
    match args.engine.backend {
        Some(backend) => eprintln!("loading {} on {backend}", args.engine.model.display()),
        None => eprintln!("loading {}", args.engine.model.display()),
    }
    let (tokenizer, engine) = load(&args.engine)?;
    let im_end = tokenizer
        .id_of("<|im_end|>")
        .context("the vocabulary has no <|im_end|> token, so it cannot chat in ChatML")?;
    let mut chat = Conversation {
        engine,
        tokenizer,
        system: args.system.clone(),
        thinking: !args.no_think,
        history: Vec::new(),
        pending: Vec::new(),
    };

    let mut sampler = Sampler::new(args.sampling.config());
    eprintln!(
        "chat: thinking {}; /reset starts over, /quit or Ctrl-D leaves, Ctrl-C stops a reply",
        if chat.thinking { "on" } else { "off" }
    );
    let mut input = std::io::stdin().lock();
    let mut stdout = std::io::stdout();
    loop {
        interrupt.enter(Phase::Prompting);
        eprint!("> ");
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        match line.trim() {
            "" => continue,
            "/quit" | "/exit" => break,
            "/reset" => {
                chat.start_fresh();
                eprintln!("(conversation reset)");
                continue;
            }
            _ => {}
        }

        let mut prompt = chat.prompt_for(line)?;
        if !chat.fits(&prompt) && chat.engine.position() > 0 {
            eprintln!(
                "(the context is full: {}, and this turn needs {} more)",
                chat.context_report(),
                prompt.len()
            );
            if !wants_fresh_context(&mut input)? {
                break;
            }
            chat.start_fresh();
            prompt = chat.prompt_for(line)?;
        }
        if !chat.fits(&prompt) {
            eprintln!(
                "(this message needs {} tokens with the system prompt and leaves no room for a \
                 reply in a context of {}; send a shorter one or raise --ctx)",
                prompt.len(),
                chat.engine.context_len()
            );
            continue;
        }

        let mut display = ReplyDisplay::new(chat.thinking, args.hide_thinking);
        interrupt.enter(Phase::Replying);
        let result = generate(
            chat.engine.as_mut(),
            &chat.tokenizer,
            &mut sampler,
            &prompt,
            &mut chat.history,
            Limits {
                max_new_tokens: args.n_predict,
                interrupt: &interrupt.stop_reply,
            },
            |piece| {
                let _ = stdout.write_all(display.filter(piece).as_bytes());
                let _ = stdout.flush();
            },
        );
        interrupt.enter(Phase::Prompting);
        let generation = result?;
        println!();
        log::info!("{}", generation.speed_report());
        match generation.stop {
            StopReason::Interrupted => eprintln!("(stopped)"),
            StopReason::Budget => eprintln!("(reply cut at {} tokens)", args.n_predict),
            StopReason::EndOfGeneration(_) => {}
            StopReason::ContextFull => {
                eprintln!(
                    "(the context is full: {}; the reply was cut there)",
                    chat.context_report()
                );
                if !wants_fresh_context(&mut input)? {
                    break;
                }
                chat.start_fresh();
                eprintln!("(fresh context; the next message starts it)");
                continue;
            }
        }
        // Close the reply with <|im_end|> in the model's state, whatever stopped it (unless the
        // model's own <|im_end|> was fed).
        let eos_ids = chat.tokenizer.eos_ids();
        let unfed = generation.unfed.filter(|t| !eos_ids.contains(t));
        chat.pending.extend(unfed);
        let closed =
            generation.stop == StopReason::EndOfGeneration(im_end) && generation.unfed.is_none();
        if !closed {
            chat.pending.push(im_end);
        }
    }
    Ok(())
}

/// Asks whether to go on in a fresh context or stop; end of input means stop.
fn wants_fresh_context(input: &mut impl BufRead) -> anyhow::Result<bool> {
    loop {
        eprint!("continue in a fresh context with the system prompt [c], or stop [s]? ");
        let mut answer = String::new();
        if input.read_line(&mut answer)? == 0 {
            eprintln!();
            return Ok(false);
        }
        match answer.trim().to_ascii_lowercase().as_str() {
            "c" | "continue" => return Ok(true),
            "s" | "stop" => return Ok(false),
            _ => {}
        }
    }
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
