//! The `qwen35` command line: one subcommand per file under src/cli/.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    keep_freed_memory();
    end_quietly_when_output_closes();
    give_drivers_a_runtime_dir();
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

/// Restores the default action of SIGPIPE, which Rust's runtime ignores: a reader that closes
/// our stdout early (`qwen35 run ... | head -c 5`) then ends the process quietly with the
/// conventional status 141, as it ends `cat`, instead of a panic in the next `println!`. Sockets
/// are unaffected: std writes to them with MSG_NOSIGNAL (SO_NOSIGPIPE on Apple systems), so a
/// client that hangs up is an error there, not a signal.
#[cfg(unix)]
fn end_quietly_when_output_closes() {
    // SAFETY: sets a signal disposition before any other thread exists; SIG_DFL is async-safe.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_when_output_closes() {}

/// Mesa's Vulkan drivers (lavapipe among them) try to reach a Wayland display when the wgpu
/// backend starts, and libwayland prints `error: XDG_RUNTIME_DIR is invalid or not set in the
/// environment.` for every attempt when the variable is missing, as it is on a headless machine
/// or under `sudo`; that reads like one of our own errors. A private directory (mode 0700 under
/// the temp dir, as the XDG spec asks of a runtime dir) gives the driver a valid one to find no
/// display in. A directory of that name we do not own, or that others may enter, is left alone.
#[cfg(all(unix, not(target_vendor = "apple")))]
fn give_drivers_a_runtime_dir() {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let valid = |path: &std::path::Path| path.is_absolute() && path.is_dir();
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|dir| valid(dir.as_ref())) {
        return;
    }
    // SAFETY: getuid cannot fail and has no side effects.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("qwen35-runtime-{uid}"));
    // An existing directory is checked below; any other failure leaves the driver's message.
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let private = std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0);
    if private {
        // Called before any other thread exists, so nothing reads the environment meanwhile.
        std::env::set_var("XDG_RUNTIME_DIR", &dir);
    }
}

#[cfg(not(all(unix, not(target_vendor = "apple"))))]
fn give_drivers_a_runtime_dir() {}

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
