//! Long generations on the tiny Q8_0 fixture (Q8_0 has the fast GEMV on lavapipe; the f32 one is
//! ~3× slower there), on the CPU and on wgpu (lavapipe in CI): every step's
//! logits finite, memory flat apart from the KV cache, and snapshot/restore still bit-exact at
//! the end. CI runs 2,048 tokens; the 32,768-token form is ignored by default:
//! `cargo test --release --test long_run -- --ignored --nocapture`. Besides, wgpu is held to the
//! CPU 4k tokens deep in CI and 8k with `--ignored` (`wgpu_matches_the_cpu_*_tokens_deep`).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, Engine, ModelError};

/// Resident memory is per process: one run at a time, or they would measure each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Tokens re-fed after restoring the snapshot taken this far before the end.
const REPLAYED: usize = 256;
/// Resident memory taken at this many evenly spaced points after the warm-up and before the
/// snapshot (whose host copy would count against the backend).
const CHECKPOINTS: usize = 8;
/// Growth allowed beyond the KV cache rows written (allocator and driver noise).
const RSS_SLACK_BYTES: u64 = 4 << 20;

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

fn greedy(logits: &[f32]) -> u32 {
    logits
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i as u32)
        .expect("logits")
}

fn engine(kind: BackendKind, ctx: usize) -> Option<Box<dyn Engine>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-q8_0.gguf");
    let file = Arc::new(GgufFile::open(path).expect("fixture opens"));
    match load_engine(file, kind, 2, ctx) {
        Ok(engine) => Some(engine),
        Err(ModelError::BackendUnavailable { reason, .. })
            if std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1") =>
        {
            eprintln!("NOTICE: skipping the {kind} long run: {reason}");
            None
        }
        Err(e) => panic!("{kind}: {e}"),
    }
}

/// Generates `tokens` greedy tokens after a one-token prompt, with every check of the module.
fn long_run(kind: BackendKind, tokens: usize) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ctx = tokens + 1;
    let Some(mut engine) = engine(kind, ctx) else {
        return;
    };
    let config = engine.config();
    // A row of k and v each, in f32 (wgpu's default, GpuOptions::f16_kv_cache off).
    let kv_row_bytes = (config.n_kv_head * config.head_dim * 4 * 2) as u64;
    let attention_layers = config
        .layers
        .iter()
        .filter(|kind| matches!(kind, qwen35::model::LayerKind::FullAttention))
        .count() as u64;
    let kv_bytes_per_token = kv_row_bytes * attention_layers;

    let started = Instant::now();
    let mut logits = engine.eval(&[1], false).expect("prompt");
    let warm_up = tokens / (CHECKPOINTS + 1);
    let snapshot_at = tokens - REPLAYED;
    let mut baseline: Option<(usize, u64)> = None;
    let mut snapshot = None;
    let mut fed_after_snapshot = Vec::new();
    let mut logits_after_snapshot = Vec::new();
    for step in 1..=tokens {
        if let Some(bad) = logits.iter().position(|x| !x.is_finite()) {
            panic!("{kind}: logit {bad} is {} at step {step}", logits[bad]);
        }
        if step == snapshot_at {
            snapshot = Some(engine.snapshot().expect("snapshot"));
        }
        if step % warm_up == 0 && step < snapshot_at {
            let rss = resident_bytes();
            match baseline {
                None => baseline = Some((step, rss)),
                Some((first, first_rss)) => {
                    let kv_growth = (step - first) as u64 * kv_bytes_per_token;
                    let growth = rss.saturating_sub(first_rss);
                    eprintln!(
                        "{kind}: step {step}: RSS {:.1} MiB, +{:.2} MiB since step {first} \
                         (KV rows written since: {:.2} MiB), {:.1} s",
                        rss as f64 / 1048576.0,
                        growth as f64 / 1048576.0,
                        kv_growth as f64 / 1048576.0,
                        started.elapsed().as_secs_f64()
                    );
                    assert!(
                        growth <= kv_growth + RSS_SLACK_BYTES,
                        "{kind}: resident memory grew {growth} bytes from step {first} to \
                         {step}, more than the {kv_growth} bytes of KV cache written"
                    );
                }
            }
        }
        if step == tokens {
            break;
        }
        let next = greedy(&logits);
        logits = engine.eval(&[next], false).expect("decode");
        if snapshot.is_some() {
            fed_after_snapshot.push(next);
            logits_after_snapshot.push(logits.clone());
        }
    }
    assert_eq!(engine.position(), tokens);
    let generated = started.elapsed().as_secs_f64();

    let snapshot = snapshot.expect("snapshot taken");
    engine.restore(&snapshot).expect("restore");
    for (i, (&token, expected)) in fed_after_snapshot
        .iter()
        .zip(&logits_after_snapshot)
        .enumerate()
    {
        let replayed = engine.eval(&[token], false).expect("replay");
        let same = replayed.len() == expected.len()
            && replayed
                .iter()
                .zip(expected)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{kind}: replayed token {i} after restore differs");
    }
    eprintln!(
        "{kind}: {tokens} tokens in {generated:.1} s ({:.0} tok/s); {} replayed bit-identically \
         after restoring the snapshot at {snapshot_at}",
        tokens as f64 / generated,
        fed_after_snapshot.len()
    );
}

#[test]
fn cpu_2k_tokens() {
    long_run(BackendKind::Cpu, 2048);
}

#[test]
fn wgpu_2k_tokens() {
    long_run(BackendKind::Wgpu, 2048);
}

#[test]
#[ignore = "minutes; run with --ignored"]
fn cpu_32k_tokens() {
    long_run(BackendKind::Cpu, 32768);
}

#[test]
#[ignore = "minutes on lavapipe; run with --ignored"]
fn wgpu_32k_tokens() {
    long_run(BackendKind::Wgpu, 32768);
}

/// The prompt is fed in prefill chunks of this many tokens (lavapipe decodes a few tokens a
/// second; it prefills 2,048 in ~20-40 s), then this many greedy decode steps follow.
const DEEP_CHUNK: usize = 2048;
const DEEP_DECODE: usize = 8;

#[test]
fn wgpu_matches_the_cpu_4k_tokens_deep() {
    wgpu_against_the_cpu_deep(2);
}

#[test]
#[ignore = "minutes on lavapipe; run with --ignored"]
fn wgpu_matches_the_cpu_8k_tokens_deep() {
    wgpu_against_the_cpu_deep(4);
}

/// wgpu against the CPU reference `chunks` × 2,048 tokens into the context: at the last
/// position of every chunk, every position of the last chunk, and 8 greedy decode steps after
/// it, held to `check`'s wgpu bounds (cosine ≥ 0.99999, max |Δ| ≤ 5e-2; the fixture's logits
/// reach |16|) and the same top-1.
fn wgpu_against_the_cpu_deep(chunks: usize) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ctx = DEEP_CHUNK * chunks + DEEP_DECODE + 1;
    let Some(mut gpu) = engine(BackendKind::Wgpu, ctx) else {
        return;
    };
    let mut cpu = engine(BackendKind::Cpu, ctx).expect("the CPU backend loads");
    let vocab = cpu.config().vocab;
    // Deterministic ids over the whole vocabulary, with repeats the attention can latch onto.
    let prompt: Vec<u32> = (0..DEEP_CHUNK * chunks)
        .map(|i| ((i * 7919 + (i / 97) * 31) % vocab) as u32)
        .collect();
    let started = Instant::now();
    let compare = |what: &str, got: &[f32], want: &[f32]| {
        let agreement = qwen35::compare::compare_logits(got, want, vocab);
        assert!(
            agreement.min_cosine >= 0.999_99
                && agreement.max_abs_diff <= 5e-2
                && agreement.top1_matches == agreement.positions.len(),
            "{what}: min cosine {:.10}, max |Δ| {:.3e}, top-1 {}/{}",
            agreement.min_cosine,
            agreement.max_abs_diff,
            agreement.top1_matches,
            agreement.positions.len()
        );
        agreement
    };
    let mut last = Vec::new();
    for (i, chunk) in prompt.chunks(DEEP_CHUNK).enumerate() {
        let all = i + 1 == chunks;
        let want = cpu.eval(chunk, all).expect("cpu prefill");
        let got = gpu.eval(chunk, all).expect("wgpu prefill");
        let end = (i + 1) * DEEP_CHUNK;
        let agreement = compare(&format!("prefill to {end}"), &got, &want);
        eprintln!(
            "wgpu vs cpu, positions up to {end}: min cosine {:.10}, max |Δ| {:.3e} ({:.1} s)",
            agreement.min_cosine,
            agreement.max_abs_diff,
            started.elapsed().as_secs_f64()
        );
        last = want[want.len() - vocab..].to_vec();
    }
    for step in 0..DEEP_DECODE {
        let next = greedy(&last);
        let want = cpu.eval(&[next], false).expect("cpu decode");
        let got = gpu.eval(&[next], false).expect("wgpu decode");
        compare(
            &format!("decode step {step} at {}", cpu.position()),
            &got,
            &want,
        );
        last = want;
    }
    assert_eq!(gpu.position(), prompt.len() + DEEP_DECODE);
    eprintln!(
        "wgpu held to the cpu through {} positions in {:.1} s",
        gpu.position(),
        started.elapsed().as_secs_f64()
    );
}
