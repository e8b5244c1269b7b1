//! With no `-m`, `run` uses the bundled default model (models/qwen35-default-q8_0.gguf), says so
//! in one line on stderr, and continues a story opening with English words.

use std::process::Command;

#[test]
fn run_without_model_uses_the_default_model() {
    let output = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args([
            "run",
            "-p",
            "Once upon a time, there was a little cat named Tom.",
        ])
        .args([
            "-n",
            "24",
            "--temp",
            "0",
            "--backend",
            "cpu",
            "--threads",
            "1",
        ])
        .output()
        .expect("qwen35 starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed: {stderr}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("default model"))
        .collect();
    assert_eq!(
        notices.len(),
        1,
        "one line names the default model: {stderr}"
    );
    assert!(
        notices[0].contains("models/qwen35-default-q8_0.gguf"),
        "{}",
        notices[0]
    );
    // The model was trained on simple stories: its continuation is mostly short, common words.
    let words: Vec<&str> = stdout
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    assert!(words.len() >= 10, "too few words: {stdout:?}");
    let common = [
        "he", "she", "was", "the", "a", "to", "and", "his", "her", "with", "tom", "day", "one",
    ];
    let known = words
        .iter()
        .filter(|w| common.contains(&w.to_ascii_lowercase().as_str()))
        .count();
    assert!(
        known * 4 >= words.len(),
        "the continuation does not read like the training stories: {stdout:?}"
    );
}
