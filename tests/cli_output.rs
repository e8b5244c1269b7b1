//! What the printing subcommands do with their output streams: a reader that closes stdout early
//! (`qwen35 run ... | head -c 5`) ends the program quietly, and the Vulkan driver's complaints
//! about a missing XDG_RUNTIME_DIR do not appear among our messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn qwen35() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qwen35"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `command` with a stdout whose reading end is already closed, so its first write fails.
fn with_closed_stdout(mut command: Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qwen35 starts");
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

/// Exit 0, or death by SIGPIPE (a shell's 141), without a panic or an error line.
fn assert_quiet_end(what: &str, output: &Output) {
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert!(!stderr.contains("Broken pipe"), "{what}: {stderr}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        let by_sigpipe = output.status.signal() == Some(libc::SIGPIPE);
        assert!(
            output.status.success() || by_sigpipe,
            "{what} ended with {:?}: {stderr}",
            output.status
        );
    }
    #[cfg(not(unix))]
    assert!(output.status.success(), "{what}: {stderr}");
}

#[test]
fn run_ends_quietly_when_stdout_closes() {
    let mut command = qwen35();
    command
        .args(["run", "-m"])
        .arg(fixture("tiny-f32.gguf"))
        .args(["-p", "Hello", "-n", "8", "--temp", "0", "--threads", "1"]);
    assert_quiet_end("run", &with_closed_stdout(command));
}

#[test]
fn tokenize_ends_quietly_when_stdout_closes() {
    let mut command = qwen35();
    command
        .args(["tokenize", "-m"])
        .arg(fixture("tiny-f32.gguf"))
        .arg("Hello, world");
    assert_quiet_end("tokenize", &with_closed_stdout(command));
}

#[test]
fn info_ends_quietly_when_stdout_closes() {
    let mut command = qwen35();
    command.args(["info", "-m"]).arg(fixture("tiny-q8_0.gguf"));
    assert_quiet_end("info", &with_closed_stdout(command));
}

#[test]
fn eval_ends_quietly_when_stdout_closes() {
    let dir = std::env::temp_dir().join(format!("qwen35-cli-output-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ids = dir.join("ids.txt");
    std::fs::write(&ids, "1 2 3 4").unwrap();
    let logits = dir.join("logits.npy");
    // The reference is the engine's own dump, so the comparison table is printed.
    let dumped = qwen35()
        .args(["eval", "-m"])
        .arg(fixture("tiny-f32.gguf"))
        .arg("--tokens")
        .arg(&ids)
        .arg("--dump-logits")
        .arg(&logits)
        .output()
        .unwrap();
    assert!(dumped.status.success(), "{}", text(&dumped.stderr));
    let mut command = qwen35();
    command
        .args(["eval", "-m"])
        .arg(fixture("tiny-f32.gguf"))
        .arg("--tokens")
        .arg(&ids)
        .arg("--reference")
        .arg(&logits);
    let output = with_closed_stdout(command);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_quiet_end("eval", &output);
}

#[test]
fn bench_ends_quietly_when_stdout_closes() {
    let mut command = qwen35();
    command.args(["bench", "-p", "4", "-n", "2", "-r", "1", "--threads", "1"]);
    assert_quiet_end("bench", &with_closed_stdout(command));
}

/// Without XDG_RUNTIME_DIR (a headless machine, `sudo`), Mesa's drivers used to print
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` on every adapter query.
#[test]
fn the_vulkan_driver_does_not_complain_about_xdg_runtime_dir() {
    let output = qwen35()
        .env_remove("XDG_RUNTIME_DIR")
        .args(["run", "--backend", "wgpu", "-m"])
        .arg(fixture("tiny-f32.gguf"))
        .args(["-p", "Hi", "-n", "2", "--temp", "0"])
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    if !output.status.success() {
        assert!(
            std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1"),
            "QWEN35_REQUIRE_GPU=1 but wgpu did not run: {stderr}"
        );
        eprintln!("not run: wgpu has no adapter here: {stderr}");
        return;
    }
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "{stderr}");
}

/// The speed line after `run` counts in words a reader expects: "1 token", and the stop reason
/// as words rather than an enum's name.
#[test]
fn run_reports_its_stop_in_words() {
    let output = qwen35()
        .args(["run", "-m"])
        .arg(fixture("tiny-f32.gguf"))
        .args(["-p", "Hello", "-n", "1", "--temp", "0"])
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("decode 1 token in"), "{stderr}");
    assert!(
        stderr.contains("[stop: token limit (-n) reached]"),
        "{stderr}"
    );
}
