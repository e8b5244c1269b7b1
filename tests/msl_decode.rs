//! The whole decode step of the shared forward (src/model/forward.rs) with every op an MSL
//! kernel, through the GPU backend as `--backend metal` runs it, each MSL kernel executed by the
//! MSL simulator on the backend's buffers (msl_sim/launcher.rs), against the CPU backend on every
//! bundled fixture: cosine ≥ 0.9999 and the same top-1 at every position, and the same 32 greedy
//! tokens, also when Engine::decode_greedy keeps the token ids on the device. A decode step takes
//! no more dispatches than the WGSL kernels' (lavapipe here; skipped without an adapter unless
//! QWEN35_REQUIRE_GPU=1).

// The simulator's fiber switch is written for x86-64 and its loader for Linux.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod decode_check;
mod msl_sim;

use std::sync::Arc;

use msl_sim::launcher::{sim_gpu, SimLauncher};
use msl_sim::Order;
use qwen35::backend::gpu::Wgpu;
use qwen35::backend::BackendError;
use qwen35::model::{Config, Engine, ModelError, Session};

const GREEDY: usize = 32;
const MIN_COSINE: f64 = 0.9999;

/// The fixture on the GPU backend with the simulated MSL kernels, and their launcher; None
/// without an adapter.
fn simulated_engine(
    fixture: &decode_check::Fixture,
    order: Order,
    max_part_rows: usize,
) -> Option<(Session<Wgpu>, Arc<SimLauncher>)> {
    let config = Config::from_gguf(&fixture.file).expect("config");
    let (gpu, launcher) = sim_gpu(order, max_part_rows)?;
    let engine = Session::new(gpu, &fixture.file, config, 256).expect("load");
    Some((engine, launcher))
}

/// Dispatches since the last call: those the backend recorded (WGSL; MSL on a Mac) and those
/// the simulator ran.
fn take_dispatches(engine: &mut Session<Wgpu>, launcher: Option<&SimLauncher>) -> u64 {
    engine.take_stats().dispatches + launcher.map_or(0, |l| l.device.take_dispatches())
}

/// Dispatches of two greedy decode steps (each: embed of the id left on the device, the forward,
/// argmax) after the prompt.
fn greedy_step_dispatches(
    engine: &mut Session<Wgpu>,
    launcher: Option<&SimLauncher>,
    prompt: &[u32],
) -> u64 {
    engine.reset();
    let (last, earlier) = prompt.split_last().expect("a prompt");
    for &token in earlier {
        engine.eval(&[token], false).expect("eval");
    }
    take_dispatches(engine, launcher);
    engine
        .decode_greedy(*last, 2, &mut |_| true)
        .expect("decode");
    take_dispatches(engine, launcher) / 2
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
        let Some((mut engine, launcher)) = simulated_engine(fixture, order, max_part_rows) else {
            return;
        };
        let vocab = engine.config().vocab;
        launcher.device.take_dispatches();
        let ours = decode_check::run(&mut engine, &fixture.prompt, GREEDY, true);
        let steps = (fixture.prompt.len() + GREEDY - 1) as u64;
        let wgsl = engine.take_stats().dispatches;
        assert_eq!(wgsl, 0, "{}: WGSL dispatches in a decode", fixture.variant);
        let dispatches = launcher.device.take_dispatches();
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
    for fixture in &decode_check::fixtures() {
        // Whole weights, as wgpu binds these small ones.
        let Some((mut metal, launcher)) = simulated_engine(fixture, Order::Forward, usize::MAX)
        else {
            return;
        };
        let metal_dispatches = greedy_step_dispatches(&mut metal, Some(&launcher), &fixture.prompt);
        let config = Config::from_gguf(&fixture.file).expect("config");
        let gpu = Wgpu::new().expect("the adapter opened once already");
        let mut wgpu = Session::new(gpu, &fixture.file, config, 256).expect("load on wgpu");
        let wgpu_dispatches = greedy_step_dispatches(&mut wgpu, None, &fixture.prompt);
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

/// Faults on the simulated Metal path surface through the one GPU backend as the device's typed
/// error: a lost device fails the next token, a failed readback of an MSL kernel's buffers fails
/// eval and greedy decoding (and every later op) instead of handing back stale logits.
#[test]
fn faults_of_the_simulated_metal_device_are_typed_errors() {
    let fixture = &decode_check::fixtures()[0];
    let prompt = &fixture.prompt;
    let plants: [(&str, fn(&Wgpu, &SimLauncher)); 2] = [
        ("lost", |gpu, _| gpu.device().destroy()),
        ("reading back", |_, launcher| launcher.fail_readbacks()),
    ];
    for (cause, plant) in plants {
        let Some((mut engine, launcher)) = simulated_engine(fixture, Order::Forward, usize::MAX)
        else {
            return;
        };
        engine
            .eval(&prompt[..1], false)
            .expect("a healthy device evaluates");
        plant(engine.backend(), &launcher);
        assert_device_error(engine.eval(&prompt[1..2], false), cause);
        assert_device_error(engine.decode_greedy(prompt[2], 4, &mut |_| true), cause);
        assert!(engine.snapshot().is_err(), "{cause}");
    }
}
