//! `qwen35 tokenize`: the model's own tokenizer, both ways.

use super::{load_tokenizer, open_gguf, parse_token_ids};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct TokenizeArgs {
    /// GGUF model file (its vocabulary is used).
    #[arg(short, long)]
    model: PathBuf,
    /// Text to tokenize, or with --decode token ids separated by spaces or commas.
    text: String,
    /// Turn token ids back into text.
    #[arg(long)]
    decode: bool,
    /// Treat special-token text such as <|im_start|> as plain text.
    #[arg(long)]
    no_special: bool,
}

pub fn run(args: TokenizeArgs) -> anyhow::Result<()> {
    let file = open_gguf(&args.model)?;
    let tokenizer = load_tokenizer(&file, &args.model)?;
    if args.decode {
        let ids = parse_token_ids(&args.text)?;
        if let Some(bad) = ids
            .iter()
            .find(|&&id| id as usize >= tokenizer.vocab_size())
        {
            anyhow::bail!(
                "token id {bad} is outside the vocabulary ({} tokens)",
                tokenizer.vocab_size()
            );
        }
        println!("{}", tokenizer.decode(&ids));
    } else {
        let ids = tokenizer.encode(&args.text, !args.no_special)?;
        let shown: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        println!("{}", shown.join(" "));
    }
    Ok(())
}
