//! Flags out of their range are refused before anything loads, with a message that names the
//! flag and the range; negative numbers reach the check instead of reading as flags.

use std::path::Path;
use std::process::{Command, Output};

fn qwen35(args: &[&str]) -> Output {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32.gguf");
    let (subcommand, rest) = args.split_first().unwrap();
    Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg(subcommand)
        .arg("-m")
        .arg(fixture)
        .args(rest)
        .output()
        .expect("qwen35 starts")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `args` must fail as a usage error (status 2) whose message holds `flag` and `range`.
fn assert_refused(args: &[&str], flag: &str, range: &str) {
    let output = qwen35(args);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
    assert!(
        message.contains(flag) && message.contains(range),
        "{args:?} should name {flag} and {range:?}: {message}"
    );
    assert!(!message.contains("panicked"), "{args:?}: {message}");
}

const RUN: &[&str] = &["run", "-p", "hi"];

fn run_with(flags: &[&'static str]) -> Vec<&'static str> {
    RUN.iter().chain(flags).copied().collect()
}

#[test]
fn sampling_flags_out_of_range_are_refused() {
    let at_least_zero = "at least 0";
    for (flags, flag, range) in [
        (&["--temp", "-1"][..], "--temp", at_least_zero),
        (&["--temp=-0.5"], "--temp", at_least_zero),
        (&["--temp", "nan"], "--temp", at_least_zero),
        (&["--temp", "inf"], "--temp", at_least_zero),
        (&["--top-p", "2"], "--top-p", "above 0 and at most 1"),
        (&["--top-p", "0"], "--top-p", "above 0 and at most 1"),
        (&["--min-p", "5"], "--min-p", "from 0 to 1"),
        (&["--min-p", "-0.1"], "--min-p", "from 0 to 1"),
        (&["--repeat-penalty", "0"], "--repeat-penalty", "above 0"),
        (&["--repeat-penalty", "-1.5"], "--repeat-penalty", "above 0"),
    ] {
        assert_refused(&run_with(flags), flag, range);
    }
    // The same parsers serve chat.
    assert_refused(
        &["chat", "--top-p", "1.5"],
        "--top-p",
        "above 0 and at most 1",
    );
}

#[test]
fn counts_of_zero_are_refused() {
    let one = "at least 1";
    assert_refused(&run_with(&["-n", "0"]), "--n-predict", one);
    assert_refused(&run_with(&["--ctx", "0"]), "--ctx", one);
    assert_refused(&run_with(&["--threads", "0"]), "--threads", one);
    assert_refused(&["chat", "-n", "0"], "--n-predict", one);
    assert_refused(&["eval", "--ctx", "0", "--tokens", "x"], "--ctx", one);
    assert_refused(&["info", "--ctx", "0"], "--ctx", one);
}

/// A negative value is a value, refused with its range, not an unknown flag "-5".
#[test]
fn negative_counts_are_read_as_values_and_refused() {
    let one = "at least 1";
    assert_refused(&run_with(&["--ctx", "-5"]), "--ctx", one);
    assert_refused(&run_with(&["-n", "-1"]), "--n-predict", one);
    assert_refused(&run_with(&["--top-k", "-1"]), "--top-k", "at least 0");
    assert_refused(&["bench", "-p", "-5"], "--prompt", one);
    assert_refused(&["bench", "-r", "-1"], "--repeats", one);
    assert_refused(&["bench", "--peak-gbps", "-1"], "--peak-gbps", "above 0");
}

#[test]
fn think_and_no_think_together_are_refused() {
    assert_refused(
        &["chat", "--think", "--no-think"],
        "--think",
        "cannot be used with",
    );
}

#[test]
fn values_in_range_are_accepted() {
    let output = qwen35(&run_with(&[
        "-n",
        "2",
        "--temp",
        "0.5",
        "--top-p",
        "1",
        "--min-p",
        "0",
        "--repeat-penalty",
        "1.1",
        "--seed",
        "1",
    ]));
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn more_threads_than_cores_are_cut_to_the_cores_with_a_warning() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let output = qwen35(&run_with(&[
        "-n",
        "1",
        "--temp",
        "0",
        "--threads",
        "100000",
    ]));
    let message = stderr(&output);
    assert!(output.status.success(), "{message}");
    assert!(
        message.contains(&format!(
            "--threads 100000 is more than the {cores} cores here; using {cores}"
        )),
        "{message}"
    );
}

/// `eval --tokens` takes the ids themselves or a file of them, with the same logits; a value
/// that is neither is named.
#[test]
fn eval_takes_token_ids_inline_or_from_a_file() {
    let dir = std::env::temp_dir().join(format!("qwen35-cli-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ids = dir.join("ids.txt");
    std::fs::write(&ids, "5 6\n7\n").unwrap();
    let logits = |tokens: &str, name: &str| {
        let out = dir.join(name);
        let output = qwen35(&[
            "eval",
            "--tokens",
            tokens,
            "--dump-logits",
            out.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{tokens}: {}", stderr(&output));
        std::fs::read(out).unwrap()
    };
    let from_file = logits(ids.to_str().unwrap(), "file.npy");
    let inline = logits("5,6,7", "inline.npy");
    let missing = qwen35(&[
        "eval",
        "--tokens",
        "no/such/ids.txt",
        "--dump-logits",
        "x.npy",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(from_file, inline);
    assert!(
        stderr(&missing).contains("\"no/such/ids.txt\" is neither a file nor a list of token ids")
    );
}
