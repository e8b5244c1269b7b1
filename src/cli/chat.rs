//! `qwen35 chat`: interactive multi-turn chat through the model's chat template. The state at
//! message boundaries is cached, so each turn prefills only what follows the last one. Ctrl-C stops a reply, not the session; during
//! the load, or at the prompt, it leaves with status 130. When the context fills up the user
//! chooses between a fresh context (the system prompt, if any, is kept and prefilled again) and
//! stopping. Lines that start with '/' are commands (/help lists them), never sent to the model.

use super::{at_least_one, load, load_chat_template, prompt_cache_file, EngineArgs, SamplingArgs};
use anyhow::Context;
use clap::Args;
use qwen35::chat::{tokenize_at_boundaries, ChatTemplate, Message, RenderOptions, Role};
use qwen35::generate::{generate, Limits, StopReason};
use qwen35::model::Engine;
use qwen35::prefix_cache::{prefill_boundaries, PrefixCache};
use qwen35::sample::Sampler;
use qwen35::tokenizer::Tokenizer;
use qwen35::units::count;
use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
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
    #[arg(long, conflicts_with = "no_think")]
    think: bool,
    /// Answer directly, without a reasoning block.
    #[arg(long = "no-think")]
    no_think: bool,
    /// Do not print the reasoning block (it is still generated when thinking is on).
    #[arg(long)]
    hide_thinking: bool,
    /// Most tokens per reply.
    #[arg(short = 'n', long, default_value_t = 4096, allow_negative_numbers = true, value_parser = at_least_one)]
    n_predict: usize,
    /// Memory for model states kept at message boundaries, in MiB (0: none; every turn then
    /// prefills the whole conversation).
    #[arg(long, default_value_t = 1024)]
    cache_mb: usize,
    /// A state file: read into the cache at the start (refused if it was saved for another
    /// model, or is truncated or corrupted), the state used last written to it at the end.
    #[arg(long)]
    prompt_cache: Option<PathBuf>,
}

/// What /help prints.
const HELP: &str = "\
commands (a line that starts with '/'; start a message with a space to send a '/'):
  /help    this list
  /reset   forget the conversation and start over (the system prompt is kept)
  /quit    leave (also /exit, or Ctrl-D on an empty line)
Ctrl-C stops a reply; at the prompt it leaves.";

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

/// One conversation: its messages, rendered whole through the model's chat template each turn;
/// the state at message boundaries is cached, so a turn prefills only its new part.
struct Conversation {
    engine: Box<dyn Engine>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    options: RenderOptions,
    /// The system prompt (if any) and the turns so far.
    messages: Vec<Message>,
    cache: PrefixCache,
    /// The tokens the repeat penalty may look at.
    history: Vec<u32>,
}

/// A turn's whole prompt and its message boundaries (token counts).
struct Prompt {
    tokens: Vec<u32>,
    boundaries: Vec<usize>,
}

impl Conversation {
    /// The prompt that asks `line` after the conversation so far.
    fn prompt_for(&self, line: &str) -> anyhow::Result<Prompt> {
        let mut messages = self.messages.clone();
        messages.push(Message::new(Role::User, line));
        let (text, byte_boundaries) = self
            .template
            .render_with_boundaries(&messages, &self.options)?;
        let (tokens, boundaries) =
            tokenize_at_boundaries(&self.tokenizer, &text, &byte_boundaries)?;
        Ok(Prompt { tokens, boundaries })
    }

    /// Whether `prompt` fits with room for at least one reply token.
    fn fits(&self, prompt: &Prompt) -> bool {
        prompt.tokens.len() < self.engine.context_len()
    }

    fn has_system_prompt(&self) -> bool {
        self.messages
            .first()
            .is_some_and(|m| m.role == Role::System)
    }

    /// A conversation of only the system prompt; its cached state stays usable.
    fn start_fresh(&mut self) {
        self.messages.retain(|m| m.role == Role::System);
        self.engine.reset();
        self.history.clear();
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
        Some(backend) => eprintln!("loading {} on {backend}", args.engine.model().display()),
        None => eprintln!("loading {}", args.engine.model().display()),
    }
    let (tokenizer, engine) = load(&args.engine)?;
    let template = load_chat_template(args.engine.model())?;
    let prompt_file = prompt_cache_file(args.prompt_cache.as_ref(), args.engine.model())?;
    let thinking = !args.no_think;
    let mut chat = Conversation {
        engine,
        tokenizer,
        template,
        options: RenderOptions::generation(thinking),
        messages: args
            .system
            .iter()
            .map(|system| Message::new(Role::System, system.clone()))
            .collect(),
        cache: PrefixCache::new(args.cache_mb.saturating_mul(1 << 20)),
        history: Vec::new(),
    };
    if let Some(file) = &prompt_file {
        if let Some(count) = file.load_into(&mut chat.cache)? {
            eprintln!(
                "({count} tokens of state read from {})",
                file.path.display()
            );
        }
    }

    let mut sampler = Sampler::new(args.sampling.config());
    eprintln!(
        "chat: thinking {}; /help lists the commands, Ctrl-C stops a reply",
        if thinking { "on" } else { "off" }
    );
    let mut input = std::io::stdin().lock();
    let mut stdout = std::io::stdout();
    loop {
        interrupt.enter(Phase::Prompting);
        eprint!("> ");
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            // Ctrl-D: end the prompt's line, so the shell's prompt starts on its own.
            eprintln!();
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            continue;
        }
        // Only a line that starts with '/' is a command; " /etc" is a message.
        if line.starts_with('/') {
            match line.trim_end() {
                "/quit" | "/exit" => break,
                "/reset" => {
                    chat.start_fresh();
                    eprintln!("(conversation reset)");
                }
                "/help" => eprintln!("{HELP}"),
                other => eprintln!("(unknown command {other}; /help lists the commands)"),
            }
            continue;
        }

        let mut prompt = chat.prompt_for(line)?;
        if !chat.fits(&prompt) && chat.messages.iter().any(|m| m.role != Role::System) {
            eprintln!(
                "(the context is full: {}, and this turn needs {} more)",
                chat.context_report(),
                prompt.tokens.len().saturating_sub(chat.engine.position())
            );
            if !wants_fresh_context(&mut input, chat.has_system_prompt())? {
                break;
            }
            chat.start_fresh();
            prompt = chat.prompt_for(line)?;
        }
        if !chat.fits(&prompt) {
            eprintln!(
                "(this message needs {}{} and leaves no room for a reply in a context of {}; \
                 send a shorter one or raise --ctx)",
                count(prompt.tokens.len(), "token"),
                if chat.has_system_prompt() {
                    " with the system prompt"
                } else {
                    ""
                },
                chat.engine.context_len()
            );
            continue;
        }

        let mut display = ReplyDisplay::new(thinking, args.hide_thinking);
        let mut reply = String::new();
        interrupt.enter(Phase::Replying);
        let result = prefill_boundaries(
            chat.engine.as_mut(),
            &mut chat.cache,
            &prompt.tokens,
            &prompt.boundaries,
        )
        .map_err(anyhow::Error::from)
        .and_then(|prefilled| {
            log::info!("{} prompt tokens from the state cache", prefilled.cached);
            chat.history = prompt.tokens[..prefilled.position].to_vec();
            generate(
                chat.engine.as_mut(),
                &chat.tokenizer,
                &mut sampler,
                &prompt.tokens[prefilled.position..],
                &mut chat.history,
                Limits {
                    max_new_tokens: args.n_predict,
                    interrupt: &interrupt.stop_reply,
                },
                |piece| {
                    reply.push_str(piece);
                    let _ = stdout.write_all(display.filter(piece).as_bytes());
                    let _ = stdout.flush();
                    ControlFlow::Continue(())
                },
            )
            .map_err(anyhow::Error::from)
        });
        interrupt.enter(Phase::Prompting);
        let generation = result?;
        println!();
        log::info!("{}", generation.speed_report());
        match generation.stop {
            StopReason::Interrupted | StopReason::Declined => eprintln!("(stopped)"),
            StopReason::Budget => {
                eprintln!("(reply cut at {})", count(args.n_predict, "token"))
            }
            StopReason::EndOfGeneration(_) => {}
            StopReason::ContextFull => {
                eprintln!(
                    "(the context is full: {}; the reply was cut there)",
                    chat.context_report()
                );
                if !wants_fresh_context(&mut input, chat.has_system_prompt())? {
                    break;
                }
                chat.start_fresh();
                eprintln!("(fresh context; the next message starts it)");
                continue;
            }
        }
        chat.messages.push(Message::new(Role::User, line));
        chat.messages.push(Message::new(Role::Assistant, reply));
    }
    if let Some(file) = &prompt_file {
        file.save_from(&chat.cache)?;
    }
    Ok(())
}

/// Asks whether to go on in a fresh context (which keeps the system prompt, if there is one) or
/// stop; end of input means stop.
fn wants_fresh_context(input: &mut impl BufRead, has_system: bool) -> anyhow::Result<bool> {
    let kept = if has_system {
        " with the system prompt"
    } else {
        ""
    };
    loop {
        eprint!("continue in a fresh context{kept} [c], or stop [s]? ");
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
