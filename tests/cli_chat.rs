//! `qwen35 chat` driven through its stdin on the tiny fixture: what happens when the context
//! fills up.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const CTX: &str = "120";
const SYSTEM: &str = "Be brief.";

/// Runs a greedy chat on the tiny fixture with `input` as stdin; replies are at most `n` tokens.
fn chat(input: &str, n: usize) -> Output {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32.gguf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("chat")
        .arg("-m")
        .arg(fixture)
        .args([
            "--ctx",
            CTX,
            "--temp",
            "0",
            "--no-think",
            "--system",
            SYSTEM,
        ])
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
