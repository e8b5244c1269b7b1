//! The `qwen35` command line: one subcommand per file under src/cli/.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    keep_freed_memory();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    match cli::run(cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// Lets glibc's allocator keep freed memory for the next allocation. By default it maps every
/// block over 128 KiB afresh and unmaps it on free, and trims the heap's free top, so each
/// activation the CPU backend allocates is page-faulted in again; on this project's 2-core VM
/// that cost prefill about a sixth of its time (0.8B preset, pp128 98 → 116 tok/s).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    use std::ffi::c_int;
    // From glibc's malloc.h.
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_THRESHOLD: c_int = -3;
    // glibc's upper limit for the mapping threshold on 64-bit targets: larger blocks (a long
    // prompt's activations on a large model) are still mapped.
    const MMAP_THRESHOLD_MAX: c_int = 32 << 20;
    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    // A refused setting (it returns 0) leaves glibc's default, which is only slower.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX);
        mallopt(M_TRIM_THRESHOLD, c_int::MAX);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

/// The error and its causes joined by ": ", leaving out a cause whose message the one before it
/// already ends with (typed errors that print their source).
fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if !text.ends_with(&message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
        }
    }
    text
}
