//! `qwen35 synth`: a random-weight GGUF with the real tensor names, shapes, metadata and stock
//! quantization types of a Qwen3.5 / Qwen3.6 size.

use super::open_gguf;
use anyhow::Context;
use clap::Args;
use qwen35::synth::{write_synthetic, Preset, Quant, SynthOptions};
use qwen35::units::bytes;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct SynthArgs {
    /// Model size to imitate (see --help for where each preset's numbers come from).
    #[arg(long, value_parser = parse_preset, long_help = preset_help())]
    preset: Preset,
    /// File type, with llama-quantize's per-tensor rules: q4_k_m, q8_0 or f16.
    #[arg(long, value_parser = parse_quant, default_value = "q4_k_m")]
    quant: Quant,
    /// Output GGUF file.
    #[arg(short, long)]
    output: PathBuf,
    /// Seed of the random weights (the same seed gives the same file).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Copy the tokenizer (tokenizer.* metadata, and with it the vocabulary size) from this GGUF
    /// instead of the built-in byte-level vocabulary.
    #[arg(long)]
    vocab_from: Option<PathBuf>,
}

pub fn run(args: SynthArgs) -> anyhow::Result<()> {
    let vocab_from = args.vocab_from.as_deref().map(open_gguf).transpose()?;
    let opts = SynthOptions {
        preset: args.preset,
        quant: args.quant,
        seed: args.seed,
        vocab_from,
    };
    let started = Instant::now();
    let mut last_report: Option<Instant> = None;
    let mut stderr = std::io::stderr();
    // A status line rewritten in place is for a terminal; a log gets the summary only.
    let terminal = stderr.is_terminal();
    let summary = write_synthetic(&opts, &args.output, |written, total| {
        let due = last_report.is_none_or(|t| t.elapsed() >= Duration::from_millis(200));
        if terminal && (due || written == total) {
            last_report = Some(Instant::now());
            let seconds = started.elapsed().as_secs_f64().max(1e-9);
            // Progress is best-effort: a closed stderr must not stop the write.
            let _ = write!(
                stderr,
                "\rwriting {}: {:>10} / {} ({:>5.1}%), {:.2} GB/s   ",
                args.output.display(),
                bytes(written),
                bytes(total),
                100.0 * written as f64 / total.max(1) as f64,
                written as f64 / 1e9 / seconds
            );
        }
    })
    .with_context(|| format!("writing {}", args.output.display()))?;
    if terminal {
        eprintln!();
    }

    println!(
        "{} {} -> {}: {} tensors ({}), vocab {}, {} in {:.2} s ({:.2} GB/s)",
        args.preset.name(),
        args.quant.name(),
        args.output.display(),
        summary.n_tensors,
        super::type_summary(&summary.type_counts),
        summary.n_vocab,
        bytes(summary.bytes),
        summary.seconds,
        summary.bytes as f64 / 1e9 / summary.seconds.max(1e-9)
    );
    Ok(())
}

pub(super) fn parse_preset(name: &str) -> Result<Preset, String> {
    Preset::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
        format!("unknown preset {name:?} (known: {})", names.join(", "))
    })
}

pub(super) fn parse_quant(name: &str) -> Result<Quant, String> {
    Quant::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Quant::ALL.iter().map(|q| q.name()).collect();
        format!("unknown quant {name:?} (known: {})", names.join(", "))
    })
}

fn preset_help() -> String {
    let mut help =
        String::from("Model size to imitate. Presets and where their numbers come from:\n");
    for preset in Preset::ALL {
        let s = preset.shape();
        help.push_str(&format!(
            "\n{}: {} layers, hidden {}, FFN {}, {}/{} heads of {}, GDN {}/{} heads of {}/{}, {}, vocab {}.\n  Source: {}\n",
            preset.name(),
            s.n_layer,
            s.n_embd,
            s.n_ff,
            s.n_head,
            s.n_head_kv,
            s.head_dim,
            s.ssm_k_heads,
            s.ssm_v_heads,
            s.ssm_k_dim,
            s.ssm_v_dim,
            if s.tied_embeddings { "tied embeddings" } else { "untied output" },
            s.vocab_size.map_or("built-in".to_string(), |v| v.to_string()),
            preset.source()
        ));
    }
    help
}
