//! `qwen35 quantize`: an F32/F16/BF16 qwen35 GGUF → the file llama-quantize writes for a type.

use anyhow::Context;
use clap::Args;
use qwen35::convert::{quantize, QuantizeOptions};
use qwen35::synth::Quant;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct QuantizeArgs {
    /// Input GGUF (F32, F16 or BF16 tensors, e.g. from `qwen35 convert`).
    input: PathBuf,
    /// Output GGUF.
    output: PathBuf,
    /// File type: q8_0, q4_k_m, q4_k_s, q5_k_m or q6_k (llama-quantize's per-tensor mix).
    #[arg(value_parser = parse_type)]
    quant: Quant,
    /// Encoding threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Replace the output file if it exists.
    #[arg(long)]
    force: bool,
}

pub fn run(args: QuantizeArgs) -> anyhow::Result<()> {
    let opts = QuantizeOptions {
        quant: args.quant,
        threads: args.threads.unwrap_or(0),
        force: args.force,
    };
    let started = Instant::now();
    let bar = super::progress_bar();
    let summary = quantize(&args.input, &args.output, &opts, |done, total, tensor| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(tensor.to_string());
    })
    .with_context(|| {
        format!(
            "quantizing {} to {}",
            args.input.display(),
            args.output.display()
        )
    })?;
    bar.finish_and_clear();
    println!(
        "{} -> {} ({}): {} tensors ({}), {} quantized, {:.3} GB in {:.2} s",
        args.input.display(),
        args.output.display(),
        args.quant.name(),
        summary.n_tensors,
        super::type_summary(&summary.type_counts),
        summary.n_quantized,
        summary.bytes as f64 / 1e9,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn parse_type(name: &str) -> Result<Quant, String> {
    match Quant::from_name(&name.to_ascii_lowercase()) {
        Some(Quant::F16) | None => Err(format!(
            "unknown type {name:?} (known: q8_0, q4_k_m, q4_k_s, q5_k_m, q6_k)"
        )),
        Some(quant) => Ok(quant),
    }
}
