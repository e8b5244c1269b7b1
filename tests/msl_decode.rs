//! The whole decode step of the shared forward (src/model/forward.rs) with every op an MSL
//! kernel, executed by the MSL simulator, against the CPU backend on every bundled fixture:
//! cosine ≥ 0.9999 and the same top-1 at every position, and the same 32 greedy tokens.

// The simulator's fiber switch is written for x86-64 and its loader for Linux.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod decode_check;
mod msl_sim;

use msl_sim::backend::SimMetal;
use msl_sim::Order;
use qwen35::model::{Config, Engine, Session};

const GREEDY: usize = 32;
const MIN_COSINE: f64 = 0.9999;

fn simulated_engine(
    fixture: &decode_check::Fixture,
    order: Order,
    max_part_rows: usize,
) -> Session<SimMetal> {
    let config = Config::from_gguf(&fixture.file).expect("config");
    let backend = SimMetal::new(order, max_part_rows);
    Session::new(backend, &fixture.file, config, 256).expect("load")
}

#[test]
fn msl_decode_matches_cpu_on_every_fixture() {
    let fixtures = decode_check::fixtures();
    assert!(fixtures.len() >= 3, "the f32, q8_0 and q4_k fixtures");
    for fixture in &fixtures {
        let reference = decode_check::reference(fixture, GREEDY);
        // The kernel tests run every kernel in both orders; here one order per fixture keeps
        // the run short while still covering both. Two fixtures have their weights split into
        // parts of a few hundred rows, as a GPU splits those past its binding limit.
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
    }
}
