//! `qwen35 bench` through the real binary, at smoke size: the table, JSON, SVG and profile of a
//! CPU run on the tiny preset, `--skip` marking every output INVALID, the `--ladder` table and
//! JSON, the GEMV microbenchmark,
//! time to first token cold and restored, and the wgpu row where an adapter exists (required when QWEN35_REQUIRE_GPU=1).

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// Paths in the temp dir for one test's outputs, removed when dropped.
struct Outputs {
    json: PathBuf,
    svg: PathBuf,
}

impl Outputs {
    fn new(test: &str) -> Outputs {
        let stem = std::env::temp_dir().join(format!("qwen35-bench-{}-{test}", std::process::id()));
        Outputs {
            json: stem.with_extension("json"),
            svg: stem.with_extension("svg"),
        }
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--json".into(),
            self.json.display().to_string(),
            "--plot".into(),
            self.svg.display().to_string(),
        ]
    }

    fn json(&self) -> Value {
        let text = std::fs::read_to_string(&self.json).expect("JSON written");
        serde_json::from_str(&text).expect("JSON parses")
    }

    fn svg(&self) -> String {
        std::fs::read_to_string(&self.svg).expect("SVG written")
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.json);
        let _ = std::fs::remove_file(&self.svg);
    }
}

/// Runs `qwen35 bench ARGS`, failing the test unless it succeeds; returns stdout.
fn bench(args: &[&str], extra: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("bench")
        .args(args)
        .args(extra)
        .output()
        .expect("qwen35 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "qwen35 bench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn number(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

fn backend<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["backends"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["backend"] == name))
        .unwrap_or_else(|| panic!("no {name} entry in {report:#}"))
}

/// Matmuls in one token of the tiny preset: 3 Gated DeltaNet layers (qkv, z, β, α, out) and one
/// attention layer (q, k, v, out), each with a 3-matmul MLP; the output matrix is `lm_head`.
const TINY_MATMULS_PER_TOKEN: u64 = 3 * (5 + 3) + (4 + 3);

/// The calls of `class` in a profile's op list (0 when the class is absent).
fn calls(ops: &[Value], class: &str) -> u64 {
    ops.iter()
        .filter(|op| op["class"] == class)
        .map(|op| op["calls"].as_u64().unwrap_or(0))
        .sum()
}

/// A backend's decode profile: the lm_head matmul, the token choice and the token's readback are
/// classes of their own, once per token (the choice may take more than one call, e.g. the GPU's
/// two-pass argmax over a large vocabulary).
fn decode_ops_with_own_classes(backend: &Value, tokens: u64) -> Vec<Value> {
    let ops = backend
        .pointer("/run/profile/decode/ops")
        .and_then(Value::as_array)
        .expect("decode profile")
        .clone();
    for class in ["lm_head", "readback"] {
        assert_eq!(calls(&ops, class), tokens, "{class} in {ops:#?}");
    }
    assert!(calls(&ops, "sampling") >= tokens, "sampling in {ops:#?}");
    ops
}

#[test]
fn cpu_run_reports_rates_roofline_profile_json_and_svg() {
    let outputs = Outputs::new("cpu");
    let stdout = bench(
        &[
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "-p",
            "16",
            "-n",
            "4",
            "-r",
            "1",
            "--profile",
        ],
        &outputs.args(),
    );
    assert!(!stdout.contains("INVALID"), "{stdout}");
    assert!(stdout.contains("peak RSS (process)"), "{stdout}");
    assert!(
        stdout.contains("profile cpu, decode (4 tokens)"),
        "{stdout}"
    );
    assert!(stdout.contains("matmul q4_K"), "{stdout}");

    let report = outputs.json();
    assert!(report["invalid"].is_null());
    let per_token = number(&report, "/weight_bytes_per_token");
    assert!(per_token > 0.0 && per_token <= number(&report, "/file_bytes"));
    let cpu = backend(&report, "cpu");
    assert!(cpu["error"].is_null(), "{cpu:#}");
    assert_eq!(cpu.pointer("/run/prefill/0/tokens"), Some(&Value::from(16)));
    for path in [
        "/run/prefill/0/tok_per_s/median",
        "/run/decode/tok_per_s/median",
        "/run/decode/ms_per_token/min",
        "/run/effective_gbps",
        "/run/peak/gbps",
        "/run/share_of_peak",
        "/run/decode_ceiling_tok_per_s",
        "/run/process_peak_rss_bytes",
    ] {
        assert!(number(cpu, path) > 0.0, "{path} in {cpu:#}");
    }
    assert_eq!(cpu.pointer("/run/peak/source"), Some(&Value::from("probe")));
    let ms = number(cpu, "/run/decode/ms_per_token/median");
    let rate = number(cpu, "/run/decode/tok_per_s/median");
    assert!(
        (ms * rate / 1e3 - 1.0).abs() < 1e-6,
        "ms/token and tok/s agree"
    );

    // The profile counts exactly the ops the forward runs: every matmul of 4 decode tokens.
    let ops = decode_ops_with_own_classes(cpu, 4);
    let matmuls: u64 = ops
        .iter()
        .filter(|op| {
            op["class"]
                .as_str()
                .is_some_and(|c| c.starts_with("matmul "))
        })
        .map(|op| op["calls"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(matmuls, 4 * TINY_MATMULS_PER_TOKEN);
    let all_calls: u64 = ops.iter().map(|op| op["calls"].as_u64().unwrap_or(0)).sum();
    // The token choice is a backend op (counted as a dispatch); the readback is the engine's.
    let host_calls = calls(&ops, "readback");
    assert_eq!(
        number(cpu, "/run/dispatches_per_token"),
        (all_calls - host_calls) as f64 / 4.0
    );
    let percent: f64 = ops
        .iter()
        .map(|op| op["percent"].as_f64().unwrap_or(0.0))
        .sum();
    assert!((percent - 100.0).abs() < 1e-6);

    let svg = outputs.svg();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(">cpu</text>"));
    assert!(svg.contains("roofline"));
    assert!(!svg.contains("INVALID"));
}

#[test]
fn skipped_layers_mark_table_json_and_plot_invalid() {
    let outputs = Outputs::new("skip");
    let args = [
        "--preset",
        "tiny",
        "--backend",
        "cpu",
        "-p",
        "8",
        "-n",
        "2",
        "-r",
        "1",
        "--profile",
    ];
    let stdout = bench(&[&args[..], &["--skip", "gdn"]].concat(), &outputs.args());
    assert!(stdout.starts_with("INVALID"), "{stdout}");
    assert!(!stdout.contains("delta_rule"), "GDN bodies ran:\n{stdout}");
    let skipped = outputs.json();
    assert!(skipped["invalid"]
        .as_str()
        .is_some_and(|why| why.contains("--skip gdn")));
    assert!(outputs.svg().contains("INVALID"));

    // Only the token mixing is left out: every projection of the skipped layers still runs.
    bench(&args, &outputs.args());
    let full = outputs.json();
    let prefill_ops = |report: &Value| {
        backend(report, "cpu")
            .pointer("/run/profile/prefill/ops")
            .and_then(Value::as_array)
            .expect("prefill profile")
            .clone()
    };
    let matmuls = |report: &Value| -> u64 {
        prefill_ops(report)
            .iter()
            .filter(|op| {
                op["class"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("matmul "))
            })
            .map(|op| op["calls"].as_u64().unwrap_or(0))
            .sum()
    };
    assert_eq!(matmuls(&skipped), matmuls(&full));
    assert_eq!(matmuls(&full), TINY_MATMULS_PER_TOKEN);
    assert_eq!(calls(&prefill_ops(&skipped), "delta_rule"), 0);
    assert!(calls(&prefill_ops(&full), "delta_rule") > 0);
}

/// The ladder's table (one row per prompt size: four rungs' rate and ms, then six stage shares)
/// and JSON (`run.ladder`), and that each rung leaves out exactly the mixing it names.
fn check_ladder(stdout: &str, report: &Value, name: &str, sizes: &[u64]) {
    let lines: Vec<&str> = stdout.lines().collect();
    let title = lines
        .iter()
        .position(|l| l.starts_with(&format!("prefill ladder {name} ")))
        .unwrap_or_else(|| panic!("no ladder table for {name}:\n{stdout}"));
    assert!(lines[title + 1].starts_with("P "), "{stdout}");
    assert!(lines[title + 1].contains("3 skip both tok/s"), "{stdout}");
    let steps = backend(report, name)
        .pointer("/run/ladder")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no run.ladder for {name} in {report:#}"));
    assert_eq!(steps.len(), sizes.len());
    for ((step, &size), line) in steps.iter().zip(sizes).zip(&lines[title + 2..]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells.len(), 1 + 4 * 2 + 6, "{line}");
        assert_eq!(cells[0], size.to_string());
        assert_eq!(step["tokens"], size);
        let rungs = step["rungs"].as_array().expect("rungs");
        let names: Vec<&str> = rungs.iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(names, ["full", "skip gdn", "skip attn", "skip both"]);
        let stage_calls = |rung: usize, stage: &str| {
            let stages = rungs[rung]["stages"].as_array().expect("stages");
            assert_eq!(stages.len(), 6);
            stages
                .iter()
                .find(|s| s["stage"] == stage)
                .and_then(|s| s["calls"].as_u64())
                .unwrap_or_else(|| panic!("no stage {stage} in {stages:#?}"))
        };
        for rung in 0..4 {
            assert!(number(&rungs[rung], "/tok_per_s/median") > 0.0);
            assert!(number(&rungs[rung], "/ms/median") > 0.0);
            assert_eq!(
                stage_calls(rung, "gemm"),
                stage_calls(0, "gemm"),
                "rung {rung}"
            );
        }
        let (delta, attention) = (stage_calls(0, "delta_rule"), stage_calls(0, "attention"));
        assert!(delta > 0 && attention > 0 && stage_calls(0, "gemm") > 0);
        assert_eq!(
            (stage_calls(1, "delta_rule"), stage_calls(1, "attention")),
            (0, attention)
        );
        assert_eq!(
            (stage_calls(2, "delta_rule"), stage_calls(2, "attention")),
            (delta, 0)
        );
        assert_eq!(stage_calls(2, "qk_norm_rope"), 0);
        assert_eq!(
            (stage_calls(3, "delta_rule"), stage_calls(3, "attention")),
            (0, 0)
        );
        let dispatches: Vec<u64> = rungs
            .iter()
            .map(|r| r["dispatches"].as_u64().expect("dispatches"))
            .collect();
        assert!(dispatches[3] < dispatches[1] && dispatches[1] < dispatches[0]);
        assert!(dispatches[3] < dispatches[2] && dispatches[2] < dispatches[0]);
        // The stage shares are n/a exactly where the backend timed nothing.
        let timed = !rungs[0]["stages"][0]["ms"].is_null();
        assert_eq!(!line.contains("n/a"), timed, "{line}");
    }
}

#[test]
fn ladder_runs_four_rungs_at_each_prompt_size() {
    let outputs = Outputs::new("ladder");
    let args = [
        "--preset",
        "tiny",
        "--backend",
        "cpu",
        "-p",
        "8,16",
        "-n",
        "2",
        "-r",
        "1",
        "--ladder",
    ];
    let stdout = bench(&args, &outputs.args());
    let report = outputs.json();
    // The ladder leaves nothing skipped for the rest of the run.
    assert!(
        report["invalid"].is_null() && !stdout.contains("INVALID"),
        "{stdout}"
    );
    check_ladder(&stdout, &report, "cpu", &[8, 16]);
    // The CPU times every op: its shares are numbers.
    let full_stages = backend(&report, "cpu").pointer("/run/ladder/0/rungs/0/stages");
    let stages = full_stages.and_then(Value::as_array).expect("stages");
    assert!(stages.iter().all(|s| s["ms"].is_f64()), "{stages:#?}");
}

#[test]
fn gemv_reports_time_and_bandwidth() {
    let stdout = bench(
        &[
            "gemv", "--quant", "q4_k", "--rows", "256", "--cols", "512", "-r", "2",
        ],
        &[],
    );
    assert!(stdout.contains("256×512 q4_K"), "{stdout}");
    for line in ["one per call", "back to back", "256×256 floor"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(line))
            .unwrap_or_else(|| panic!("no {line:?} row in\n{stdout}"));
        let gbps: f64 = row
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no GB/s in {row:?}"));
        assert!(gbps > 0.0, "{row}");
    }
    assert!(stdout.contains("GB/s"));
}

/// `bench gemm`: a row per weight and P, each with its time and TFLOP/s, on the CPU and on
/// wgpu (whose GEMM kernels take P above one; 129 is no multiple of any tile).
#[test]
fn gemm_reports_tflops_by_shape_and_rows() {
    for backend in ["cpu", "wgpu"] {
        let stdout = bench(
            &[
                "gemm",
                "--shapes",
                "q4_k:64x256,q6_k:96x512",
                "-p",
                "1,7,129",
                "-r",
                "2",
                "--backend",
                backend,
            ],
            &[],
        );
        let rows: Vec<Vec<&str>> = stdout
            .lines()
            .filter(|l| l.starts_with("q4_K") || l.starts_with("q6_K"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let measured: Vec<String> = rows.iter().map(|r| format!("{} {}", r[1], r[2])).collect();
        assert_eq!(
            measured,
            [
                "64×256 1",
                "64×256 7",
                "64×256 129",
                "96×512 1",
                "96×512 7",
                "96×512 129"
            ],
            "{stdout}"
        );
        for row in &rows {
            let tflops: f64 = row[4].parse().unwrap_or(0.0);
            assert!(tflops > 0.0, "{backend}: {row:?}");
        }
    }
}

/// `bench ttft`: the restored runs take the whole system prompt from the cache.
#[test]
fn ttft_restores_the_system_prompt() {
    let out = Outputs::new("ttft");
    let stdout = bench(
        &[
            "ttft",
            "--system-tokens",
            "64",
            "--question-tokens",
            "8",
            "-r",
            "2",
        ],
        &["--json".into(), out.json.display().to_string()],
    );
    assert!(
        stdout.contains("| cold |") && stdout.contains("| restored |"),
        "{stdout}"
    );
    let report = out.json();
    assert_eq!(report["restored_tokens"], 64);
    assert!(number(&report, "/snapshot_bytes") > 0.0);
    for key in ["cold_secs", "restored_secs"] {
        let runs = report[key].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|s| s.as_f64().is_some_and(|s| s > 0.0)));
    }
}

#[test]
fn wgpu_row_is_included_when_an_adapter_exists() {
    let outputs = Outputs::new("wgpu");
    let stdout = bench(
        &[
            "--preset",
            "tiny",
            "--backend",
            "cpu,wgpu",
            "-p",
            "8,16",
            "-n",
            "2",
            "--cpu-prompt",
            "8",
            "--cpu-decode",
            "3",
            "-r",
            "1",
            "--profile",
        ],
        &outputs.args(),
    );
    let report = outputs.json();
    let wgpu = backend(&report, "wgpu");
    if let Some(error) = wgpu["error"].as_str() {
        assert!(
            std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1"),
            "QWEN35_REQUIRE_GPU=1 but wgpu did not run: {error}"
        );
        eprintln!("skipping the wgpu checks: {error}");
        return;
    }
    // Both backends are rows of one table, under one header with every prompt size; the CPU ran
    // its own sizes and shows none for pp16.
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("backend "))
        .expect("a table header");
    assert_eq!(stdout.matches("\nbackend ").count(), 1, "{stdout}");
    assert!(lines[header].contains("pp8 tok/s") && lines[header].contains("pp16 tok/s"));
    assert!(lines[header + 1].starts_with("cpu "), "{stdout}");
    assert!(lines[header + 2].starts_with("wgpu "), "{stdout}");
    // `qwen35 run`'s decode, greedy and sampled, for both.
    for (row, name) in [
        "cpu run --temp 0",
        "cpu run --temp 0.7",
        "wgpu run --temp 0",
    ]
    .iter()
    .enumerate()
    {
        assert!(lines[header + 3 + row].starts_with(name), "{stdout}");
    }
    assert_eq!(
        backend(&report, "wgpu").pointer("/run/run_path/1/flags"),
        Some(&Value::from("--temp 0.7"))
    );
    assert!(lines[header + 1].split_whitespace().any(|cell| cell == "-"));
    let cpu = backend(&report, "cpu");
    assert_eq!(cpu.pointer("/run/prefill/0/tokens"), Some(&Value::from(8)));
    assert!(cpu.pointer("/run/prefill/1").is_none());
    assert_eq!(cpu.pointer("/run/decode/tokens"), Some(&Value::from(3)));
    assert_eq!(
        wgpu.pointer("/run/prefill/1/tokens"),
        Some(&Value::from(16))
    );
    assert_eq!(wgpu.pointer("/run/decode/tokens"), Some(&Value::from(2)));
    assert!(number(wgpu, "/run/decode/tok_per_s/median") > 0.0);
    assert!(number(wgpu, "/run/prefill/0/tok_per_s/median") > 0.0);
    decode_ops_with_own_classes(wgpu, 2);
    decode_ops_with_own_classes(cpu, 3);
    // No --peak-gbps: a GPU's peak is not guessed.
    assert!(wgpu.pointer("/run/peak/gbps").is_some_and(Value::is_null));
    assert!(stdout.contains("wgpu: peak unknown"));
    assert!(outputs.svg().contains(">wgpu</text>"));

    let gemv = bench(
        &[
            "gemv",
            "--quant",
            "q4_k",
            "--rows",
            "256",
            "--cols",
            "512",
            "-r",
            "2",
            "--backend",
            "wgpu",
        ],
        &[],
    );
    assert!(gemv.contains("GB/s"), "{gemv}");

    let outputs = Outputs::new("wgpu-ladder");
    let args = [
        "--preset",
        "tiny",
        "--backend",
        "wgpu",
        "-p",
        "16",
        "-n",
        "1",
        "-r",
        "1",
        "--ladder",
    ];
    let stdout = bench(&args, &outputs.args());
    check_ladder(&stdout, &outputs.json(), "wgpu", &[16]);
}

/// `--depth`: decode timed again after prompts that deep, a table row and a JSON entry per
/// depth and backend; a depth the model's context cannot hold fails before the model loads.
#[test]
fn decode_at_depth_has_rows_json_and_a_context_check() {
    let outputs = Outputs::new("depth");
    let stdout = bench(
        &[
            "--preset",
            "tiny",
            "--backend",
            "cpu,wgpu",
            "-p",
            "8",
            "-n",
            "3",
            "-d",
            "5,300",
            "-r",
            "3",
        ],
        &outputs.args(),
    );
    let report = outputs.json();
    assert_eq!(report["depths"], serde_json::json!([5, 300]));
    let mut backends = vec!["cpu"];
    match backend(&report, "wgpu")["error"].as_str() {
        Some(error) => assert!(
            std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1"),
            "QWEN35_REQUIRE_GPU=1 but wgpu did not run: {error}"
        ),
        None => backends.push("wgpu"),
    }
    for name in backends {
        let run = backend(&report, name);
        for (i, depth) in [5, 300].into_iter().enumerate() {
            let at = format!("/run/decode_at_depth/{i}");
            assert_eq!(
                run.pointer(&format!("{at}/depth")),
                Some(&Value::from(depth))
            );
            assert_eq!(run.pointer(&format!("{at}/tokens")), Some(&Value::from(3)));
            let rate = number(run, &format!("{at}/tok_per_s/median"));
            let ms = number(run, &format!("{at}/ms_per_token/median"));
            assert!(
                rate > 0.0 && (ms * rate / 1e3 - 1.0).abs() < 1e-6,
                "{run:#}"
            );
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&format!("{name} tg3 @ d{depth} ")))
                .unwrap_or_else(|| panic!("no {name} row at depth {depth}:\n{stdout}"));
            assert!(row.split_whitespace().count() >= 5, "{row}");
        }
    }

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args(["bench", "--preset", "tiny", "-n", "8", "-d", "16,4090"])
        .output()
        .expect("qwen35 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--depth 4090") && stderr.contains("context of 4096 tokens"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no table: nothing was run");
}

/// Runs `qwen35 bench ARGS` with stderr captured (not a terminal); returns (stdout, stderr).
fn bench_logged(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .arg("bench")
        .args(args)
        .output()
        .expect("qwen35 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
    (stdout, stderr)
}

/// In a log (stderr not a terminal), each finished measurement is one line as it finishes, and
/// no carriage-return status line; bare `bench` says which model it runs.
#[test]
fn a_log_gets_one_line_per_measurement() {
    let (stdout, stderr) = bench_logged(&["--backend", "cpu", "-p", "4,8", "-n", "2", "-r", "1"]);
    assert!(stderr.contains("benchmarking the tiny preset"), "{stderr}");
    assert!(!stderr.contains('\r'), "{stderr:?}");
    let measured: Vec<&str> = stderr.lines().filter(|l| l.starts_with("cpu: ")).collect();
    assert_eq!(measured.len(), 5, "{stderr}");
    assert!(measured[0].starts_with("cpu: prefill 4 tokens: ") && measured[0].ends_with(" tok/s"));
    assert!(measured[1].starts_with("cpu: prefill 8 tokens: "));
    assert!(measured[2].starts_with("cpu: decode 2 tokens: "));
    assert!(measured[3].starts_with("cpu: run --temp 0: ") && measured[3].ends_with(" tok/s"));
    assert!(measured[4].starts_with("cpu: run --temp 0.7: "));
    // One run is a run, and sizes are in binary units.
    assert!(stdout.contains("of 1 run;"), "{stdout}");
    assert!(stdout.contains(" MiB"), "{stdout}");
    assert!(
        !stdout.contains(" MB") && !stdout.contains(" GB)"),
        "{stdout}"
    );
}

/// On a software rasterizer (lavapipe) bench says, before it starts, that wgpu's timings there
/// do not measure a GPU, and that a real-size model will take very long; on a GPU it says nothing.
#[test]
fn a_software_rasterizer_is_named_before_the_run() {
    let software = match qwen35::backend::gpu::adapter_info() {
        Ok(info) => info.device_type == wgpu::DeviceType::Cpu,
        Err(error) => {
            assert!(
                std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1"),
                "QWEN35_REQUIRE_GPU=1 but wgpu has no adapter: {error}"
            );
            eprintln!("not run: wgpu has no adapter: {error}");
            return;
        }
    };
    let (_, stderr) = bench_logged(&["--backend", "wgpu", "-p", "4", "-n", "1", "-r", "1"]);
    let warning = stderr
        .lines()
        .position(|l| l.contains("software rasterizer"));
    assert_eq!(warning.is_some(), software, "{stderr}");
    if let Some(warning) = warning {
        let first_measurement = stderr.lines().position(|l| l.starts_with("wgpu: "));
        assert!(first_measurement.is_some_and(|m| m > warning), "{stderr}");
        // The tiny preset is quick even there: no size warning for it.
        assert!(!stderr.contains("very long"), "{stderr}");
    }
}

/// `qwen35 run --temp 0` prints the text of the tokens bench's decode chooses (the prompt
/// evaluated, its argmax, then `Engine::decode_greedy`), on the CPU and, where an adapter
/// exists, on wgpu.
#[test]
fn run_at_temperature_zero_decodes_the_tokens_of_bench() {
    use qwen35::model::{load_engine, BackendKind};
    use qwen35::sample::argmax;
    use qwen35::tokenizer::Tokenizer;
    use std::sync::Arc;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny-q8_0.gguf");
    let prompt = "The capital of France is";
    let n = 12;
    let mut kinds = vec![BackendKind::Cpu];
    if qwen35::backend::gpu::Wgpu::new().is_ok() {
        kinds.push(BackendKind::Wgpu);
    }
    for kind in kinds {
        let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
            .args(["run", "-m", path, "--backend", kind.name(), "--temp", "0"])
            .args(["-n", &n.to_string(), "--threads", "1", "-p", prompt])
            .output()
            .expect("qwen35 runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let file = Arc::new(qwen35::gguf::GgufFile::open(path).unwrap());
        let tokenizer = Tokenizer::from_gguf(&file).unwrap();
        let ids = tokenizer.encode(prompt, true).unwrap();
        let mut engine = load_engine(file, kind, 1, 256).unwrap();
        let first = argmax(&engine.eval(&ids, false).unwrap());
        let mut tokens = vec![first];
        tokens.extend(engine.decode_greedy(first, n - 1, &mut |_| true).unwrap());
        if let Some(end) = tokens.iter().position(|t| tokenizer.eos_ids().contains(t)) {
            tokens.truncate(end);
        }
        assert!(tokens.len() > 3, "{kind}: {tokens:?}");
        assert_eq!(stdout, tokenizer.decode(&tokens) + "\n", "{kind}");
    }
}
