//! The `qwen35` command line: one subcommand per file under src/cli/.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    match cli::run(cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose message the one before it
/// already ends with (typed errors that print their source).
fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if !text.ends_with(&message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
        }
    }
    text
}
