//! `qwen35 eval`: teacher-forced logits of a whole token sequence, for outside tools to check.

use super::{load, parse_token_ids, EngineArgs};
use anyhow::Context;
use clap::Args;
use qwen35::compare::compare_logits;
use qwen35::npy;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Token ids separated by whitespace or commas ("1,2,3"), or a file that holds them.
    #[arg(long)]
    tokens: String,
    /// Write all-position logits here as .npy (f32, [n_tokens, vocab]).
    #[arg(long)]
    dump_logits: Option<PathBuf>,
    /// Compare with these reference logits (.npy, same shape): cosine, max |Δ|, top-1 per position.
    #[arg(long)]
    reference: Option<PathBuf>,
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.dump_logits.is_some() || args.reference.is_some(),
        "nothing to do: give --dump-logits and/or --reference"
    );
    let ids = read_ids(&args.tokens)?;
    let (_, mut engine) = load(&args.engine)?;
    let vocab = engine.config().vocab;
    for &id in &ids {
        anyhow::ensure!(
            (id as usize) < vocab,
            "--tokens: token id {id} is outside the vocabulary ({vocab} tokens)"
        );
    }
    let logits = engine.eval(&ids, true)?;
    if let Some(path) = &args.dump_logits {
        npy::write_f32(path, &[ids.len(), vocab], &logits)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "wrote {} x {} logits to {}",
            ids.len(),
            vocab,
            path.display()
        );
    }
    if let Some(path) = &args.reference {
        let (shape, reference) = npy::read_f32(path)?;
        anyhow::ensure!(
            shape == [ids.len(), vocab],
            "{}: shape {shape:?}, expected [{}, {vocab}]",
            path.display(),
            ids.len()
        );
        let agreement = compare_logits(&logits, &reference, vocab);
        println!("pos  token     cosine      max|Δ|  top1  ref_top1");
        for (i, p) in agreement.positions.iter().enumerate() {
            println!(
                "{i:>3} {:>6} {:>10.7} {:>11.4e} {:>5} {:>9}",
                ids[i], p.cosine, p.max_abs_diff, p.top1, p.reference_top1
            );
        }
        println!(
            "min cosine {:.7}, max |Δ| {:.4e}, top-1 agreement {}/{}",
            agreement.min_cosine,
            agreement.max_abs_diff,
            agreement.top1_matches,
            ids.len()
        );
    }
    Ok(())
}

/// The ids in the file `tokens` names, or else the ids `tokens` spells out.
fn read_ids(tokens: &str) -> anyhow::Result<Vec<u32>> {
    let path = Path::new(tokens);
    let ids = if path.is_file() {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        parse_token_ids(&text).with_context(|| format!("reading {}", path.display()))?
    } else {
        parse_token_ids(tokens).with_context(|| {
            format!("--tokens {tokens:?} is neither a file nor a list of token ids")
        })?
    };
    anyhow::ensure!(!ids.is_empty(), "--tokens {tokens:?}: no token ids");
    Ok(ids)
}
