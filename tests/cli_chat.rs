//! `qwen35 chat` driven through its stdin on the tiny fixture: what happens when the context
//! fills up, and Ctrl-C (SIGINT) during a reply and during the load.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CTX: &str = "120";
const SYSTEM: &str = "Be brief.";

/// Runs a greedy chat on the tiny fixture with `input` as stdin; replies are at most `n` tokens.
fn chat(input: &str, n: usize) -> Output {
    chat_with(&["--system", SYSTEM], input, n)
}

/// [`chat`] with `flags` in place of the system prompt.
fn chat_with(flags: &[&str], input: &str, n: usize) -> Output {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32.gguf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("chat")
        .arg("-m")
        .arg(fixture)
        .args(["--ctx", CTX, "--temp", "0", "--no-think"])
        .args(flags)
        .args(["-n", &n.to_string(), "--threads", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qwen35 starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A reply that runs into the context limit is cut there and says so; continuing gives a fresh
/// context that holds the system prompt again: the next reply is exactly what a new session with
/// the same system prompt answers to the same message.
#[test]
fn a_full_context_continues_fresh_with_the_system_prompt() {
    // The tiny fixture never ends a greedy reply by itself, so 500 tokens overrun 120 positions.
    let continued = chat("hello there\nc\nsecond question\n", 500);
    let stderr = text(&continued.stderr);
    assert!(continued.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("the context is full: 120 of 120 positions used; the reply was cut there")
            .count(),
        2,
        "{stderr}"
    );
    assert!(stderr.contains("continue in a fresh context with the system prompt [c], or stop [s]?"));

    let fresh = chat("second question\n", 500);
    assert!(fresh.status.success());
    let (continued, fresh) = (text(&continued.stdout), text(&fresh.stdout));
    assert!(continued.len() > fresh.len());
    assert!(
        continued.ends_with(&fresh),
        "after continuing: {continued:?}\nnew session: {fresh:?}"
    );
}

/// Answering "stop" ends the session: the lines after it are not read as messages.
#[test]
fn a_full_context_can_stop_the_session() {
    let out = chat("hello there\ns\nnot a message\n", 500);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the reply was cut there"), "{stderr}");
    assert_eq!(stderr.matches("\n> ").count(), 1, "{stderr}");
    // End of input at the question also stops.
    let out = chat("hello there\n", 500);
    assert!(out.status.success());
    assert!(text(&out.stderr).ends_with("or stop [s]? \n"));
}

/// Without a system prompt, the question and the refusal do not mention one.
#[test]
fn a_full_context_without_a_system_prompt_does_not_mention_one() {
    let huge = "word ".repeat(200);
    let out = chat_with(&[], &format!("hello there\n{huge}\n"), 500);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("continue in a fresh context [c], or stop [s]? "),
        "{stderr}"
    );
    let out = chat_with(&[], &format!("{huge}\n"), 5);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("leaves no room for a reply"), "{stderr}");
    assert!(!stderr.contains("system prompt"), "{stderr}");
}

/// Lines that start with '/' are commands: /help lists them, an unknown one is refused, and
/// neither reaches the model; a message may start with " /". Ctrl-D (end of input) at the
/// prompt ends its line.
#[test]
fn commands_are_listed_and_unknown_ones_refused() {
    let out = chat("/help\n/frobnicate\n", 5);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for command in ["/help", "/reset", "/quit"] {
        assert!(stderr.contains(&format!("\n  {command} ")), "{stderr}");
    }
    assert!(
        stderr.contains("(unknown command /frobnicate; /help lists the commands)"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "a reply: {}", text(&out.stdout));
    assert!(stderr.ends_with("> \n"), "{stderr:?}");

    let out = chat(" /etc is a path\n", 5);
    assert!(!out.stdout.is_empty(), "{}", text(&out.stderr));
}

/// A turn that does not fit the rest of the context is not truncated: the user is asked, and a
/// fresh context takes the system prompt and the whole message. A message longer than the whole
/// context is refused and the session goes on.
#[test]
fn a_turn_that_does_not_fit_is_offered_a_fresh_context() {
    let long = "tell me more about this ".repeat(2);
    let huge = "word ".repeat(200);
    // The long turn overruns what the first exchange left; the huge one, asked after a second
    // reply, overruns that and then a whole fresh context.
    let out = chat(&format!("hello there\n{long}\nc\n{huge}\nc\n/quit\n"), 40);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let full = stderr
        .find("(the context is full: ")
        .expect("the long turn does not fit after the first reply");
    assert!(stderr[full..].contains("positions used, and this turn needs"));
    assert!(stderr.contains("raise --ctx"), "{stderr}");
    assert!(
        stderr.ends_with("raise --ctx)\n> "),
        "the session goes on: {stderr}"
    );
    // Two replies of 40 tokens: the first exchange and the long turn in the fresh context.
    assert_eq!(
        stderr.matches("(reply cut at 40 tokens)").count(),
        2,
        "{stderr}"
    );

    let fresh = chat(&format!("{long}\n"), 40);
    let (out, fresh) = (text(&out.stdout), text(&fresh.stdout));
    assert!(out.ends_with(&fresh), "{out:?} vs {fresh:?}");
}

/// Sends SIGINT, as Ctrl-C in a terminal does.
fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// Collects a pipe's output on a thread, so the test can wait for a given text.
struct Collected {
    bytes: Arc<Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Collected {
    fn from(mut pipe: impl Read + Send + 'static) -> Collected {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&bytes);
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Collected { bytes, reader }
    }

    /// The text so far: what the reader thread has taken from the pipe, which may lag behind
    /// what the process wrote.
    fn text(&self) -> String {
        text(&self.bytes.lock().unwrap())
    }

    /// The whole text, once the pipe is closed (the process has ended).
    fn all(self) -> String {
        self.reader.join().expect("the pipe's reader ends");
        text(&self.bytes.lock().unwrap())
    }

    /// Waits until `done` holds for the text so far (at most 60 s).
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(&self.text()) {
            assert!(Instant::now() < deadline, "no {what} in: {}", self.text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Ctrl-C during a reply stops that reply; the session goes on and answers the next message.
#[test]
fn ctrl_c_stops_the_reply_and_keeps_the_session() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-q8_0.gguf");
    // A reply of up to 30,000 tokens (the fixture never ends one itself): minutes unless stopped.
    let mut child = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("chat")
        .arg("-m")
        .arg(fixture)
        .args(["--ctx", "32768", "-n", "30000", "--temp", "0", "--no-think"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qwen35 starts");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = Collected::from(child.stdout.take().unwrap());
    let stderr = Collected::from(child.stderr.take().unwrap());
    for (turn, message) in ["hello\n", "and again\n"].into_iter().enumerate() {
        let shown = stdout.text().len();
        stdin.write_all(message.as_bytes()).unwrap();
        stdout.wait_for("reply", |out| out.len() > shown + 16);
        interrupt(&child);
        stderr.wait_for("stop notice", |err| {
            err.matches("(stopped)").count() == turn + 1
        });
    }
    stdin.write_all(b"/quit\n").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}: {}", stderr.all());
}

/// Ctrl-C while the model loads (here: opening a FIFO that nobody writes, so the load cannot
/// finish first) exits with 130 and says so.
#[test]
fn ctrl_c_during_the_load_exits_with_a_message() {
    let dir = std::env::temp_dir().join(format!("qwen35-chat-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("model.gguf");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("chat")
        .arg("-m")
        .arg(&fifo)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qwen35 starts");
    let stderr = Collected::from(child.stderr.take().unwrap());
    stderr.wait_for("loading line", |err| err.contains("loading "));
    interrupt(&child);
    let status = child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = stderr.all();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted while loading the model"),
        "{stderr}"
    );
}
