//! `qwen35 convert`: a Hugging Face Qwen3.5 / Qwen3.6 checkpoint → the GGUF llama.cpp's converter
//! writes for it.

use anyhow::Context;
use clap::Args;
use qwen35::convert::{convert, ConvertOptions, OutType};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct ConvertArgs {
    /// Checkpoint directory: config.json, model*.safetensors (or an index and its shards),
    /// tokenizer.json, tokenizer_config.json.
    hf_dir: PathBuf,
    /// Output GGUF file.
    #[arg(short, long)]
    output: PathBuf,
    /// Type of the 2-D weight matrices: f32, f16, bf16 or q8_0 (norms, biases, the conv kernel,
    /// ssm_a stay F32, as llama.cpp's converter keeps them).
    #[arg(long, value_parser = parse_out_type, default_value = "bf16")]
    outtype: OutType,
    /// Leave out the MTP (multi-token prediction) layers.
    #[arg(long)]
    no_mtp: bool,
    /// Replace the output file if it exists.
    #[arg(long)]
    force: bool,
}

pub fn run(args: ConvertArgs) -> anyhow::Result<()> {
    let opts = ConvertOptions {
        out_type: args.outtype,
        no_mtp: args.no_mtp,
        force: args.force,
    };
    let started = Instant::now();
    let bar = super::progress_bar();
    let summary = convert(&args.hf_dir, &args.output, &opts, |done, total, tensor| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(tensor.to_string());
    })
    .with_context(|| {
        format!(
            "converting {} to {}",
            args.hf_dir.display(),
            args.output.display()
        )
    })?;
    bar.finish_and_clear();
    if summary.skipped_vision > 0 {
        println!(
            "skipped the vision tower ({} tensors): only the text model is converted",
            summary.skipped_vision
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{} -> {} ({}): {} tensors, {} parameters, {} MTP layers, {:.3} GB in {:.2} s",
        summary.architecture,
        args.output.display(),
        args.outtype.name(),
        summary.n_tensors,
        summary.n_params,
        summary.n_mtp_layers,
        summary.bytes as f64 / 1e9,
        seconds
    );
    Ok(())
}

fn parse_out_type(name: &str) -> Result<OutType, String> {
    OutType::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = OutType::ALL.iter().map(|t| t.name()).collect();
        format!("unknown out type {name:?} (known: {})", names.join(", "))
    })
}
