//! The timing loop the bench targets share (no harness crate): batches sized to about 50 ms,
//! the best and median batch reported per iteration.

use std::hint::black_box;
use std::time::{Duration, Instant};

const BATCH: Duration = Duration::from_millis(50);
const BATCHES: usize = 7;

/// Times `f`, printing `name`, time per call and, given the bytes one call reads, GB/s.
pub fn time<T>(name: &str, bytes_per_call: Option<u64>, mut f: impl FnMut() -> T) {
    // Grow the batch until it takes long enough that the clock's resolution does not matter.
    let mut iterations = 1u64;
    loop {
        let started = Instant::now();
        for _ in 0..iterations {
            black_box(f());
        }
        if started.elapsed() >= BATCH || iterations >= 1 << 30 {
            break;
        }
        iterations *= 2;
    }
    let mut per_call: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                black_box(f());
            }
            started.elapsed().as_secs_f64() / iterations as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    let (best, median) = (per_call[0], per_call[BATCHES / 2]);
    let bandwidth = bytes_per_call
        .map(|b| format!("  {:8.2} GB/s", b as f64 / best / 1e9))
        .unwrap_or_default();
    println!(
        "{name:<32} best {:>10.3} µs  median {:>10.3} µs{bandwidth}",
        best * 1e6,
        median * 1e6
    );
}
