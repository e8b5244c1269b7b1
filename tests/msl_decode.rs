//! The whole decode step of the shared forward (src/model/forward.rs) with every op an MSL
//! kernel, executed by the MSL simulator, against the CPU backend on every bundled fixture:
//! cosine ≥ 0.9999 and the same top-1 at every position, and the same 32 greedy tokens, also
//! when Engine::decode_greedy keeps the token ids on the device. A decode step takes no more
//! dispatches than the wgpu backend's (lavapipe here; skipped without an adapter unless
//! QWEN35_REQUIRE_GPU=1).

// The simulator's fiber switch is written for x86-64 and its loader for Linux.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod decode_check;
mod msl_sim;

use std::io::Write;

use msl_sim::backend::{sim_metal, SimMetal};
use msl_sim::Order;
use qwen35::backend::gpu::Wgpu;
use qwen35::backend::{Backend, BackendError};
use qwen35::model::{Config, Engine, ModelError, Session};

const GREEDY: usize = 32;
const MIN_COSINE: f64 = 0.9999;

fn simulated_engine(
    fixture: &decode_check::Fixture,
    order: Order,
    max_part_rows: usize,
) -> Session<SimMetal> {
    let config = Config::from_gguf(&fixture.file).expect("config");
    let backend = sim_metal(order, max_part_rows);
    Session::new(backend, &fixture.file, config, 256).expect("load")
}

/// Dispatches of two greedy decode steps (each: embed of the id left on the device, the forward,
/// argmax) after the prompt.
fn greedy_step_dispatches<B: Backend>(engine: &mut Session<B>, prompt: &[u32]) -> u64 {
    engine.reset();
    let (last, earlier) = prompt.split_last().expect("a prompt");
    for &token in earlier {
        engine.eval(&[token], false).expect("eval");
    }
    engine.take_stats();
    engine
        .decode_greedy(*last, 2, &mut |_| true)
        .expect("decode");
    engine.take_stats().dispatches / 2
}

#[test]
fn msl_decode_matches_cpu_on_every_fixture() {
    let fixtures = decode_check::fixtures();
    assert!(fixtures.len() >= 3, "the f32, q8_0 and q4_k fixtures");
    for fixture in &fixtures {
        let reference = decode_check::reference(fixture, GREEDY);
        // The kernel tests run every kernel in both fixed orders and in random interleavings;
        // here one fixed order per fixture keeps the run short while still covering both. Two
        // fixtures have their weights split into parts of a few hundred rows, as a GPU splits
        // those past its binding limit.
        let (order, max_part_rows) = match fixture.variant.as_str() {
            "f32" => (Order::Forward, usize::MAX),
            "q8_0" => (Order::Reverse, 100),
            _ => (Order::Forward, 300),
        };
        let mut engine = simulated_engine(fixture, order, max_part_rows);
        let vocab = engine.config().vocab;
        let ours = decode_check::run(&mut engine, &fixture.prompt, GREEDY, true);
        let steps = (fixture.prompt.len() + GREEDY - 1) as u64;
        let dispatches = engine.take_stats().dispatches;
        eprintln!(
            "{}: {} MSL dispatches per decode step ({order:?} order, weights in parts of {} rows)",
            fixture.variant,
            dispatches / steps,
            max_part_rows.min(1 << 20)
        );
        decode_check::assert_agrees(
            &format!("msl ({}) vs cpu", fixture.variant),
            &ours,
            &reference,
            vocab,
            MIN_COSINE,
        );

        // Greedy decoding with the ids on the device: the prompt but its last token one at a
        // time, then decode_greedy from the last.
        engine.reset();
        let (last, earlier) = fixture.prompt.split_last().expect("a prompt");
        for &token in earlier {
            engine.eval(&[token], false).expect("eval");
        }
        let greedy = engine
            .decode_greedy(*last, GREEDY, &mut |_| true)
            .expect("decode_greedy");
        assert_eq!(
            greedy, reference.greedy,
            "{}: decode_greedy on the device vs the CPU's host loop",
            fixture.variant
        );
    }
}

#[test]
fn msl_decode_step_takes_no_more_dispatches_than_wgpu() {
    let wgpu_available = match Wgpu::new() {
        Ok(gpu) => Some(gpu),
        Err(e) if std::env::var("QWEN35_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("QWEN35_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "NOTICE: skipping the wgpu comparison: {e}"
            );
            None
        }
    };
    let Some(first_gpu) = wgpu_available else {
        return;
    };
    let mut gpus = Some(first_gpu);
    for fixture in &decode_check::fixtures() {
        let gpu = match gpus.take() {
            Some(gpu) => gpu,
            None => Wgpu::new().expect("the adapter opened once already"),
        };
        let config = Config::from_gguf(&fixture.file).expect("config");
        let mut wgpu = Session::new(gpu, &fixture.file, config, 256).expect("load on wgpu");
        let wgpu_dispatches = greedy_step_dispatches(&mut wgpu, &fixture.prompt);
        // Whole weights, as wgpu binds these small ones.
        let mut metal = simulated_engine(fixture, Order::Forward, usize::MAX);
        let metal_dispatches = greedy_step_dispatches(&mut metal, &fixture.prompt);
        eprintln!(
            "{}: {metal_dispatches} MSL dispatches per greedy decode step, {wgpu_dispatches} wgpu",
            fixture.variant
        );
        assert!(
            metal_dispatches > 0 && metal_dispatches <= wgpu_dispatches,
            "{}: {metal_dispatches} MSL dispatches per step against wgpu's {wgpu_dispatches}",
            fixture.variant
        );
    }
}

/// The typed error of the device, where a backend that forgot to ask the device would return
/// empty logits or token 0.
fn assert_device_error(result: Result<impl std::fmt::Debug, ModelError>, cause: &str) {
    match result {
        Err(ModelError::Backend(BackendError::Device(message))) => {
            assert!(message.contains(cause), "{message}")
        }
        other => panic!("expected the device's error ({cause}), got {other:?}"),
    }
}

/// Faults planted in the simulated device surface through the Metal backend's glue as the
/// device's typed error: a lost device fails the next token, a failed readback fails eval and
/// greedy decoding instead of handing back no logits.
#[test]
fn faults_of_the_simulated_metal_device_are_typed_errors() {
    let fixture = &decode_check::fixtures()[0];
    let prompt = &fixture.prompt;
    let plants: [(&str, fn(&SimMetal)); 2] = [
        ("lost", |metal| metal.device().memory.lose_device()),
        ("readback", |metal| metal.device().memory.fail_readbacks()),
    ];
    for (cause, plant) in plants {
        let mut engine = simulated_engine(fixture, Order::Forward, usize::MAX);
        engine
            .eval(&prompt[..1], false)
            .expect("a healthy device evaluates");
        plant(engine.backend());
        assert_device_error(engine.eval(&prompt[1..2], false), cause);
        assert_device_error(engine.decode_greedy(prompt[2], 4, &mut |_| true), cause);
        assert!(engine.snapshot().is_err(), "{cause}");
    }
}
