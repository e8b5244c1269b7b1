//! `qwen35 tokenize`: the model's own tokenizer, both ways.

use super::{load_tokenizer, open_gguf, parse_token_ids, read_text_file};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct TokenizeArgs {
    /// GGUF model file (its vocabulary is used).
    #[arg(short, long)]
    model: PathBuf,
    /// Text to tokenize, or with --decode token ids separated by spaces or commas.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    text: Option<String>,
    /// Read the text (or the ids) from this file instead; one final newline is dropped, as
    /// `perplexity -f` does, so that the ids are the ones it scores.
    #[arg(short = 'f', long)]
    file: Option<PathBuf>,
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
    let text = match (&args.text, &args.file) {
        (Some(text), _) => text.clone(),
        (None, Some(path)) => read_text_file(path)?,
        (None, None) => anyhow::bail!("give the text or --file"),
    };
    if args.decode {
        let ids = parse_token_ids(&text)?;
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
        let ids = tokenizer.encode(&text, !args.no_special)?;
        let shown: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        println!("{}", shown.join(" "));
    }
    Ok(())
}
