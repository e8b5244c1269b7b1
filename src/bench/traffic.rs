//! Memory traffic: the weight bytes one decode token must read, the machine's streaming-read
//! bandwidth, and the process's peak resident memory.

use std::time::Instant;

use rayon::prelude::*;

use crate::gguf::GgufFile;
use crate::model::Config;

/// Bytes of weights one decode token reads: every tensor of the layers, the output matrix
/// (`token_embd` when tied) and one embedding row. Tensors of layers past the config's stack
/// (e.g. a multi-token-prediction block) are not read by the forward and not counted. `--skip`
/// leaves the count as it is: what it takes out of the forward are the mixing's small tensors.
pub fn weight_bytes_per_token(file: &GgufFile, config: &Config) -> u64 {
    let layers: u64 = file
        .tensors()
        .iter()
        .filter(|t| layer_of(&t.name).is_some_and(|layer| layer < config.layers.len()))
        .map(|t| t.n_bytes)
        .sum();
    let embedding = file.tensor("token_embd.weight");
    let output = file.tensor("output.weight").or(embedding);
    let embedding_row = embedding.map_or(0, |t| t.row_bytes());
    layers + output.map_or(0, |t| t.n_bytes) + embedding_row
}

/// The layer index of a `blk.N.*` tensor.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// Bytes the bandwidth probe streams through: far more than any last-level cache.
const PROBE_BYTES: usize = 256 << 20;

/// Streaming-read bandwidth of this machine in GB/s: the best of a few timed sums over a large
/// buffer, split over `threads` threads (0: one per core).
pub fn probe_read_gbps(threads: usize) -> Result<f64, rayon::ThreadPoolBuildError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let words = PROBE_BYTES / std::mem::size_of::<u64>();
    // Written by the pool, so pages are spread like the reads (first touch).
    let buffer: Vec<u64> = pool.install(|| (0..words as u64).into_par_iter().collect());
    let best = pool.install(|| {
        (0..3)
            .map(|_| {
                let started = Instant::now();
                let sum = buffer
                    .par_chunks(1 << 16)
                    .map(|chunk| chunk.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
                    .reduce(|| 0, u64::wrapping_add);
                std::hint::black_box(sum);
                started.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    });
    Ok(PROBE_BYTES as f64 / best.max(1e-9) / 1e9)
}

/// The process's peak resident memory in bytes (Linux `VmHWM`); None where
/// `/proc/self/status` does not say.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Lowers the peak to the current resident size (Linux `clear_refs` 5), so the next reading is
/// the peak of what runs from now on; false where the kernel does not allow it.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
