//! `qwen35 info`: what a GGUF file holds and what running it needs. It validates the whole
//! model (config and every tensor's presence, type and shape), so a bad file fails here.

use super::{load_tokenizer, open_gguf};
use clap::Args;
use qwen35::model::{load_engine, BackendKind, LayerKind};
use qwen35::units::bytes;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Args)]
pub struct InfoArgs {
    /// GGUF model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Context length to size the state for.
    #[arg(long, default_value_t = 8192, allow_negative_numbers = true, value_parser = super::at_least_one)]
    ctx: usize,
}

pub fn run(args: InfoArgs) -> anyhow::Result<()> {
    let file = open_gguf(&args.model)?;
    // Loading on the CPU maps the weights without copying them; it checks every tensor.
    let engine = load_engine(file.clone(), BackendKind::Cpu, 1, 1)?;
    let c = engine.config();
    let tokenizer = load_tokenizer(&file, &args.model)?;
    anyhow::ensure!(
        tokenizer.vocab_size() == c.vocab,
        "{}: the tokenizer has {} tokens but token_embd has {} rows",
        args.model.display(),
        tokenizer.vocab_size(),
        c.vocab
    );

    let mut types: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in file.tensors() {
        let entry = types.entry(t.ggml_type.name()).or_default();
        entry.0 += 1;
        entry.1 += t.n_bytes;
    }
    let weight_bytes: u64 = file.tensors().iter().map(|t| t.n_bytes).sum();
    let n_attention = c
        .layers
        .iter()
        .filter(|k| **k == LayerKind::FullAttention)
        .count();
    let n_delta = c.layers.len() - n_attention;

    println!(
        "file        {} ({}, GGUF v{}, {} tensors, {} metadata keys)",
        args.model.display(),
        bytes(file.file_size()),
        file.version(),
        file.tensors().len(),
        file.metadata().count()
    );
    if let Ok(Some(name)) = file.get_str_opt("general.name") {
        println!("name        {name}");
    }
    println!(
        "arch        qwen35: {} layers ({} Gated DeltaNet, {} gated full attention)",
        c.layers.len(),
        n_delta,
        n_attention
    );
    println!(
        "dims        hidden {}, ffn {}, vocab {}, trained context {}",
        c.n_embd, c.n_ff, c.vocab, c.train_context
    );
    println!(
        "attention   {} heads / {} kv heads x {}, RoPE on {} dims, base {}",
        c.n_head, c.n_kv_head, c.head_dim, c.rope_dims, c.rope_base
    );
    println!(
        "deltanet    {} key heads x {}, {} value heads x {}, conv {}",
        c.ssm_k_heads, c.ssm_k_dim, c.ssm_v_heads, c.ssm_v_dim, c.conv_kernel
    );
    let eos: Vec<String> = tokenizer
        .eos_ids()
        .iter()
        .map(|id| id.to_string())
        .collect();
    println!(
        "tokenizer   {} tokens, end of generation {}",
        tokenizer.vocab_size(),
        eos.join(" ")
    );
    let listed: Vec<String> = types
        .iter()
        .map(|(name, (n, _))| format!("{name} {n}"))
        .collect();
    println!("tensors     {}", listed.join(", "));

    let f32_bytes = 4u64;
    let kv = (n_attention * 2 * c.n_kv_head * c.head_dim * args.ctx) as u64 * f32_bytes;
    let recurrent = (n_delta * c.ssm_v_heads * c.ssm_k_dim * c.ssm_v_dim) as u64 * f32_bytes;
    let conv = (n_delta * (c.conv_kernel - 1) * c.conv_channels()) as u64 * f32_bytes;
    println!("weights     {}", bytes(weight_bytes));
    println!(
        "state       {} at --ctx {} (KV cache {} f32, {} with --f16-kv-cache on a GPU; recurrent {}, conv {})",
        bytes(kv + recurrent + conv),
        args.ctx,
        bytes(kv),
        bytes(kv / 2),
        bytes(recurrent),
        bytes(conv)
    );
    println!(
        "memory      {} needed (weights + state)",
        bytes(weight_bytes + kv + recurrent + conv)
    );
    Ok(())
}
