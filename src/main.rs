// The CLI in src/cli/ is wired in once the model and tokenizer modules land.
fn main() {
    eprintln!("qwen35: the CLI is being assembled");
    std::process::exit(2);
}
