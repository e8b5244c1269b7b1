//! `qwen35 serve` on the tiny fixture, on 127.0.0.1 at a free port, driven by curl and by the
//! official `openai` Python client (tests/serve_openai.py). Every client call has a time limit
//! and every loop a fixed count.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CTX: &str = "256";
/// Seconds any one client call may take.
const CALL_LIMIT: &str = "60";
const MESSAGE: &str = "What is the capital of France?";
const PROMPT: &str = "The capital of France is";
const MAX_TOKENS: usize = 12;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32.gguf")
}

struct Server {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        Server::start_with_env(extra, &[])
    }

    fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_qwen35"))
            .arg("serve")
            .arg("-m")
            .arg(fixture())
            .args(["--port", "0", "--threads", "1"])
            .args(if extra.contains(&"--ctx") {
                &[][..]
            } else {
                &["--ctx", CTX]
            })
            .args(extra)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("qwen35 serve starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(at) = line.find("http://") {
                    let _ = url_tx.send(line[at..].trim().to_owned());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let url = url_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no address: {}", stderr.lock().unwrap()));
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Server { child, url, stderr }
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// One request through curl: (status, body).
    fn curl(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[&str],
    ) -> (u16, String) {
        let mut command = Command::new("curl");
        command
            .args([
                "-sS",
                "-N",
                "-m",
                CALL_LIMIT,
                "-X",
                method,
                "-w",
                "\n%{http_code}",
            ])
            .args(["-H", "Content-Type: application/json"]);
        for header in headers {
            command.args(["-H", header]);
        }
        if body.is_some() {
            command.args(["--data-binary", "@-"]);
        }
        let mut child = command
            .arg(format!("{}{path}", self.url))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("curl runs");
        let mut stdin = child.stdin.take().unwrap();
        if let Some(body) = body {
            // The server may answer (413) before reading it all.
            let _ = stdin.write_all(body);
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').expect("curl wrote a status");
        (
            status.trim().parse().unwrap_or_else(|_| {
                panic!("no status: {text} {}", String::from_utf8_lossy(&out.stderr))
            }),
            body.to_owned(),
        )
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, text) = self.curl("POST", path, Some(body.to_string().as_bytes()), &[]);
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (status, value)
    }

    /// A streamed request: the `data:` payloads, `[DONE]` last.
    fn post_stream(&self, path: &str, body: &Value) -> Vec<String> {
        let (status, text) = self.curl("POST", path, Some(body.to_string().as_bytes()), &[]);
        assert_eq!(status, 200, "{text}");
        text.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(str::to_owned)
            .collect()
    }

    /// Stops the server with SIGTERM and returns whether it exited cleanly.
    fn stop(mut self) -> (bool, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        let exit = loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                break exit;
            }
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(100));
        (exit.success(), self.log())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chat_body(messages: Value, max_tokens: usize) -> Value {
    json!({
        "model": "tiny",
        "messages": messages,
        "temperature": 0,
        "max_tokens": max_tokens,
        "chat_template_kwargs": { "enable_thinking": false },
    })
}

/// `qwen35 run` on the fixture, greedy: its stdout without the closing newline.
fn run_cli(extra: &[&str]) -> String {
    run_cli_sampled(&["--temp", "0"], extra)
}

/// `qwen35 run` on the fixture with the sampling flags `sampling`.
fn run_cli_sampled(sampling: &[&str], extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("run")
        .arg("-m")
        .arg(fixture())
        .args(["--ctx", CTX, "--threads", "1"])
        .args(sampling)
        .args(["-n", &MAX_TOKENS.to_string()])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_suffix('\n').unwrap_or(&text).to_owned()
}

/// The concatenated deltas of a streamed chat reply and its finish reason.
fn streamed_chat(events: &[String]) -> (String, String) {
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let mut text = String::new();
    let mut finish = String::new();
    for event in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(event).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
        for choice in chunk["choices"].as_array().unwrap() {
            text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
            if let Some(reason) = choice["finish_reason"].as_str() {
                finish = reason.to_owned();
            }
        }
    }
    (text, finish)
}

#[test]
fn curl_streamed_and_whole_replies_match_run() {
    let server = Server::start(&[]);
    let messages = json!([{ "role": "user", "content": MESSAGE }]);
    let (status, whole) = server.post(
        "/v1/chat/completions",
        &chat_body(messages.clone(), MAX_TOKENS),
    );
    assert_eq!(status, 200, "{whole}");
    let content = whole["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(whole["choices"][0]["finish_reason"], "length");
    assert_eq!(whole["usage"]["completion_tokens"], MAX_TOKENS);
    let mut stream_body = chat_body(messages, MAX_TOKENS);
    stream_body["stream"] = json!(true);
    let (streamed, finish) =
        streamed_chat(&server.post_stream("/v1/chat/completions", &stream_body));
    assert_eq!(streamed, content);
    assert_eq!(finish, "length");
    assert!(!content.is_empty());
    assert_eq!(content, run_cli(&["--chat", "-p", MESSAGE]));

    let completion_body = json!({ "prompt": PROMPT, "temperature": 0, "max_tokens": MAX_TOKENS });
    let (status, completion) = server.post("/v1/completions", &completion_body);
    assert_eq!(status, 200, "{completion}");
    let text = completion["choices"][0]["text"].as_str().unwrap();
    assert_eq!(text, run_cli(&["-p", PROMPT]));
    let mut stream_body = completion_body.clone();
    stream_body["stream"] = json!(true);
    let events = server.post_stream("/v1/completions", &stream_body);
    let streamed: String = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .map(|c| c["choices"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(streamed, text);

    // Thinking on: the prompt opens the reasoning block, so the reply is all reasoning here.
    let mut thinking = chat_body(json!([{ "role": "user", "content": MESSAGE }]), MAX_TOKENS);
    thinking["chat_template_kwargs"]["enable_thinking"] = json!(true);
    let (status, reply) = server.post("/v1/chat/completions", &thinking);
    assert_eq!(status, 200);
    let message = &reply["choices"][0]["message"];
    assert!(
        !message["reasoning_content"].as_str().unwrap().is_empty(),
        "{reply}"
    );
    assert_eq!(message["content"], "");

    let (status, models) = server.curl("GET", "/v1/models", None, &[]);
    assert_eq!(status, 200);
    assert!(models.contains("\"tiny-f32\""), "{models}");
}

/// Whether this machine has a wgpu adapter; without one the wgpu half of a test is skipped,
/// unless QWEN35_REQUIRE_GPU=1 (CI, on lavapipe) makes that a failure.
fn wgpu_available() -> bool {
    let file = std::sync::Arc::new(qwen35::gguf::GgufFile::open(fixture()).unwrap());
    match qwen35::model::load_engine(file, qwen35::model::BackendKind::Wgpu, 1, 16) {
        Ok(_) => true,
        Err(qwen35::model::ModelError::BackendUnavailable { reason, .. })
            if std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1") =>
        {
            eprintln!("NOTICE: skipping the wgpu half: {reason}");
            false
        }
        Err(e) => panic!("wgpu: {e}"),
    }
}

/// A sampled reply (temperature above 0, a fixed seed) is drawn by `run`'s loop on the server
/// too: whole and streamed, it is `qwen35 run`'s reply with the same seed and settings, on the
/// CPU and on wgpu (lavapipe in CI), where the draw is made by the GPU's sampling kernels.
#[test]
fn sampled_replies_equal_run_with_the_same_seed() {
    let mut backends = vec!["cpu"];
    if wgpu_available() {
        backends.push("wgpu");
    }
    let sampling = [
        "--temp", "0.9", "--top-k", "0", "--top-p", "0.95", "--seed", "7",
    ];
    for backend in backends {
        let server = Server::start(&["--backend", backend]);
        let mut body = chat_body(json!([{ "role": "user", "content": MESSAGE }]), MAX_TOKENS);
        body["temperature"] = json!(0.9);
        body["top_k"] = json!(0);
        body["top_p"] = json!(0.95);
        body["seed"] = json!(7);
        let (status, whole) = server.post("/v1/chat/completions", &body);
        assert_eq!(status, 200, "{backend}: {whole}");
        let content = whole["choices"][0]["message"]["content"].as_str().unwrap();
        body["stream"] = json!(true);
        let (streamed, _) = streamed_chat(&server.post_stream("/v1/chat/completions", &body));
        assert_eq!(streamed, content, "{backend}");
        let run = run_cli_sampled(&sampling, &["--backend", backend, "--chat", "-p", MESSAGE]);
        assert_eq!(content, run, "{backend}");
        // The draw was made: greedy decoding gives another reply.
        let greedy = run_cli(&["--backend", backend, "--chat", "-p", MESSAGE]);
        assert_ne!(content, greedy, "{backend}");
    }
}

/// A panic while a request is served, in the HTTP handler or on the model's thread (planted
/// through QWEN35_TEST_PANIC, which makes the first chat request panic there), gives that
/// client a 500 with an OpenAI-style error; `/health` answers after it and later requests get
/// the replies they would have got.
#[test]
fn a_panic_in_a_request_is_a_500_and_the_server_serves_on() {
    let expected = run_cli(&["--chat", "-p", MESSAGE]);
    let body = chat_body(json!([{ "role": "user", "content": MESSAGE }]), MAX_TOKENS);
    for site in ["route", "model"] {
        let server = Server::start_with_env(&[], &[("QWEN35_TEST_PANIC", site)]);
        let (status, error) = server.post("/v1/chat/completions", &body);
        assert_eq!(status, 500, "{site}: {error}");
        assert_eq!(error["error"]["type"], "server_error", "{site}: {error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("inside the server")),
            "{site}: {error}"
        );
        let (status, health) = server.curl("GET", "/health", None, &[]);
        assert_eq!(
            (status, health.as_str()),
            (200, r#"{"status":"ok"}"#),
            "{site}"
        );
        for _ in 0..2 {
            let (status, reply) = server.post("/v1/chat/completions", &body);
            assert_eq!(status, 200, "{site}: {reply}");
            assert_eq!(
                reply["choices"][0]["message"]["content"], expected,
                "{site}"
            );
        }
        assert!(server.log().contains("QWEN35_TEST_PANIC planted"), "{site}");
    }
}

/// The `openai` Python client; `QWEN35_PYTHON` names the interpreter that has it.
#[test]
fn the_openai_python_client_gets_what_curl_gets() {
    let python = std::env::var("QWEN35_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_client = Command::new(&python)
        .args(["-c", "import openai"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_client {
        assert_ne!(
            std::env::var("QWEN35_REQUIRE_OPENAI").as_deref(),
            Ok("1"),
            "QWEN35_REQUIRE_OPENAI=1 but {python} cannot import openai"
        );
        eprintln!("skipped: {python} has no openai package (pip install openai)");
        return;
    }
    let server = Server::start(&[]);
    let mut child = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve_openai.py"))
        .arg(format!("{}/v1", server.url))
        .args([MESSAGE, PROMPT, &MAX_TOKENS.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the openai client did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();

    let (_, whole) = server.post(
        "/v1/chat/completions",
        &chat_body(json!([{ "role": "user", "content": MESSAGE }]), MAX_TOKENS),
    );
    let expected_chat = whole["choices"][0]["message"]["content"].clone();
    assert_eq!(got["chat"], expected_chat);
    assert_eq!(got["chat_streamed"], expected_chat);
    assert_eq!(got["chat_finish"], "length");
    assert_eq!(got["chat_streamed_finish"], "length");
    assert_eq!(got["chat_completion_tokens"], MAX_TOKENS);
    assert_eq!(got["chat_streamed_completion_tokens"], MAX_TOKENS);
    let expected_text = run_cli(&["-p", PROMPT]);
    assert_eq!(got["completion"], expected_text.as_str());
    assert_eq!(got["completion_streamed"], expected_text.as_str());
    assert_eq!(got["models"], json!(["tiny-f32"]));
}

/// The second turn restores the state after the first turn's messages and prefills only the
/// rest, and its reply is token for token a cold run's of the whole conversation.
#[test]
fn a_second_turn_uses_the_cached_state_and_matches_a_cold_run() {
    let system = json!({ "role": "system", "content": "You are terse." });
    let first = json!({ "role": "user", "content": MESSAGE });
    let server = Server::start(&[]);
    let (status, turn1) = server.post(
        "/v1/chat/completions",
        &chat_body(json!([system, first]), 8),
    );
    assert_eq!(status, 200, "{turn1}");
    assert_eq!(turn1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let reply = turn1["choices"][0]["message"]["content"].clone();
    let conversation = json!([
        system,
        first,
        { "role": "assistant", "content": reply },
        { "role": "user", "content": "And of Italy?" },
    ]);
    let (status, turn2) = server.post("/v1/chat/completions", &chat_body(conversation.clone(), 16));
    assert_eq!(status, 200, "{turn2}");
    let cached = turn2["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    let prompt_tokens = turn2["usage"]["prompt_tokens"].as_u64().unwrap();
    // At least the system prompt and the first question came from the cache.
    assert!(
        cached >= turn1["usage"]["prompt_tokens"].as_u64().unwrap() / 2,
        "{turn2}"
    );
    assert!(cached < prompt_tokens);

    let cold = Server::start(&["--cache-mb", "0"]);
    let (status, cold_turn2) = cold.post("/v1/chat/completions", &chat_body(conversation, 16));
    assert_eq!(status, 200);
    assert_eq!(
        cold_turn2["usage"]["prompt_tokens_details"]["cached_tokens"],
        0
    );
    assert_eq!(cold_turn2["usage"]["completion_tokens"], 16);
    assert_eq!(
        turn2["choices"][0]["message"]["content"],
        cold_turn2["choices"][0]["message"]["content"]
    );
    assert_eq!(turn2["usage"]["completion_tokens"], 16);
    assert_eq!(
        turn2["choices"][0]["finish_reason"],
        cold_turn2["choices"][0]["finish_reason"]
    );
}

#[test]
fn bad_requests_get_openai_errors_and_the_server_goes_on() {
    let server = Server::start(&[]);
    let chat = "/v1/chat/completions";
    let ok = chat_body(json!([{ "role": "user", "content": "hi" }]), 2);
    let with = |field: &str, value: Value| {
        let mut body = ok.clone();
        body[field] = value;
        body.to_string()
    };
    let huge_prompt = json!({ "prompt": "word ".repeat(400), "max_tokens": 1 }).to_string();
    let cases: Vec<(&str, &str, String, u16)> = vec![
        ("POST", chat, "{\"messages\": [".into(), 400),
        ("POST", chat, "not json".into(), 400),
        ("POST", chat, with("temperature", json!("hot")), 400),
        ("POST", chat, with("messages", json!("hello")), 400),
        ("POST", chat, with("messages", json!([])), 400),
        (
            "POST",
            chat,
            with("messages", json!([{ "role": "wizard", "content": "x" }])),
            400,
        ),
        ("POST", chat, with("max_tokens", json!(0)), 400),
        ("POST", chat, with("max_tokens", json!(-3)), 400),
        ("POST", chat, with("max_completion_tokens", json!(0)), 400),
        ("POST", chat, with("temperature", json!(-1)), 400),
        ("POST", chat, with("top_p", json!(0)), 400),
        ("POST", chat, with("top_k", json!(-1)), 400),
        ("POST", chat, with("n", json!(2)), 400),
        (
            "POST",
            chat,
            with("stop", json!(["a", "b", "c", "d", "e"])),
            400,
        ),
        ("POST", "/v1/completions", huge_prompt, 400),
        (
            "POST",
            "/v1/completions",
            json!({ "prompt": 5 }).to_string(),
            400,
        ),
        ("POST", "/v1/nothing", ok.to_string(), 404),
        ("GET", "/nowhere", String::new(), 404),
        ("GET", chat, String::new(), 405),
        ("DELETE", "/v1/models", String::new(), 405),
    ];
    for (method, path, body, expected) in &cases {
        let body = (!body.is_empty()).then_some(body.as_bytes());
        let (status, text) = server.curl(method, path, body, &[]);
        assert_eq!(status, *expected, "{method} {path}: {text}");
        let error: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{text}"
        );
        assert!(error["error"]["type"].is_string(), "{text}");
    }
    let (status, text) = server.curl("POST", "/v1/completions", Some(&vec![b' '; 17 << 20]), &[]);
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("over the limit"), "{text}");
    let (status, text) = server.curl("POST", "/v1/completions", Some(cases[14].2.as_bytes()), &[]);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("context_length_exceeded"), "{text}");

    let (status, health) = server.curl("GET", "/health", None, &[]);
    assert_eq!((status, health.as_str()), (200, r#"{"status":"ok"}"#));
    let (status, _) = server.post(chat, &ok);
    assert_eq!(status, 200);
}

#[test]
fn the_api_key_is_checked() {
    let server = Server::start(&["--api-key", "sesame"]);
    let body = chat_body(json!([{ "role": "user", "content": "hi" }]), 2).to_string();
    for headers in [
        &[][..],
        &["Authorization: Bearer wrong"],
        &["Authorization: sesame"],
    ] {
        let (status, text) = server.curl(
            "POST",
            "/v1/chat/completions",
            Some(body.as_bytes()),
            headers,
        );
        assert_eq!(status, 401, "{headers:?}: {text}");
        assert!(text.contains("invalid_api_key"), "{text}");
    }
    let (status, _) = server.curl("GET", "/v1/models", None, &["Authorization: Bearer nope"]);
    assert_eq!(status, 401);
    let (status, text) = server.curl(
        "POST",
        "/v1/chat/completions",
        Some(body.as_bytes()),
        &["Authorization: Bearer sesame"],
    );
    assert_eq!(status, 200, "{text}");
    let (status, _) = server.curl("GET", "/health", None, &[]);
    assert_eq!(status, 200);
}

#[test]
fn sixteen_concurrent_clients_are_all_answered() {
    let server = Arc::new(Server::start(&[]));
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let server = Arc::clone(&server);
            std::thread::spawn(move || {
                let mut body = chat_body(
                    json!([{ "role": "user", "content": format!("question {i}") }]),
                    4,
                );
                if i % 2 == 1 {
                    body["stream"] = json!(true);
                    let (text, finish) =
                        streamed_chat(&server.post_stream("/v1/chat/completions", &body));
                    (finish, text)
                } else {
                    let (status, reply) = server.post("/v1/chat/completions", &body);
                    assert_eq!(status, 200, "{reply}");
                    let choice = &reply["choices"][0];
                    (
                        choice["finish_reason"].as_str().unwrap().to_owned(),
                        choice["message"]["content"].as_str().unwrap().to_owned(),
                    )
                }
            })
        })
        .collect();
    for client in clients {
        let (finish, _) = client.join().expect("a client failed");
        assert_eq!(finish, "length");
    }
    let (status, _) = server.curl("GET", "/health", None, &[]);
    assert_eq!(status, 200);
}

/// A client that leaves mid-stream stops its generation at once: the log says how many tokens
/// it got, far fewer than asked, and the next request is served.
#[test]
fn a_client_that_disconnects_frees_the_model() {
    let server = Server::start(&["--ctx", "4096"]);
    let body = json!({ "prompt": "Once upon a time", "temperature": 0, "max_tokens": 4000, "stream": true });
    let mut curl = Command::new("curl")
        .args([
            "-sS",
            "-N",
            "-m",
            CALL_LIMIT,
            "-H",
            "Content-Type: application/json",
            "-d",
        ])
        .arg(body.to_string())
        .arg(format!("{}/v1/completions", server.url))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(curl.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a first event").unwrap();
    assert!(first.starts_with("data: "), "{first}");
    curl.kill().unwrap();
    curl.wait().unwrap();
    drop(lines);

    let (status, _) = server.post(
        "/v1/completions",
        &json!({ "prompt": "Hi", "max_tokens": 2 }),
    );
    assert_eq!(status, 200);
    let log = server.log();
    let cancelled: usize = log
        .split("request cancelled after ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cancellation in the log: {log}"));
    assert!(cancelled < 4000, "{cancelled}");
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let server = Server::start(&[]);
    let (status, _) = server.post(
        "/v1/completions",
        &json!({ "prompt": "Hi", "max_tokens": 2 }),
    );
    assert_eq!(status, 200);
    let (clean, log) = server.stop();
    assert!(clean, "{log}");
    assert!(log.contains("stopped"), "{log}");
}

/// `--prompt-cache`: the state `qwen35 run` saved is restored for the same prompt, and the state
/// used last is written back when the server stops.
#[test]
fn the_server_reads_and_writes_the_prompt_cache() {
    let dir = std::env::temp_dir().join(format!("qwen35-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("prompt.state");
    let _ = std::fs::remove_file(&path);
    let path_arg = path.to_str().unwrap();
    run_cli(&["-p", PROMPT, "--prompt-cache", path_arg]);

    let server = Server::start(&["--prompt-cache", path_arg]);
    let body = json!({ "prompt": PROMPT, "temperature": 0, "max_tokens": 3 });
    let (status, reply) = server.post("/v1/completions", &body);
    assert_eq!(status, 200, "{reply}");
    let prompt_tokens = reply["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(
        reply["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64(),
        Some(prompt_tokens - 1)
    );
    let (clean, log) = server.stop();
    assert!(clean, "{log}");

    let model = qwen35::gguf::GgufFile::open(fixture()).unwrap();
    let identity = qwen35::state_file::ModelIdentity::of(&model);
    let (tokens, _) = qwen35::state_file::load(&path, identity).unwrap();
    // The reply's state: the prompt and the two replied tokens that were fed.
    assert_eq!(tokens.len() as u64, prompt_tokens + 2);
}
