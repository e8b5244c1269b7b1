//! The MSL simulator: runs Metal compute kernels on Linux with threadgroup and SIMD-group
//! semantics (design: MSL_SIM.md in the project's shared docs).
//!
//! A program's MSL source is preprocessed by g++, rewritten to C++ (rewrite.rs), compiled by g++
//! against a stand-in for `<metal_stdlib>` (metal_stdlib.hpp) into a shared library, and run by a
//! fiber runtime (runtime.cpp): one fiber per GPU thread, shared threadgroup memory poisoned with
//! NaN, barriers, and 32-lane SIMD-group functions that count divergent calls. Libraries are
//! cached under target/tmp/msl_sim by a hash of everything that goes into them.
//!
//! Kernels are compiled with g++'s ThreadSanitizer instrumentation but without its runtime: the
//! calls it inserts before every memory access land in runtime.cpp, where a random schedule may
//! switch to another simulated thread.
//!
//! The simulator tells converged lanes from divergent ones by the return address of their
//! SIMD-group call, so g++ must neither merge two calls from different branches into one
//! (tail merging, cross-jumping) nor copy one call into two branches (jump threading, block
//! reordering): those optimizations are turned off.

#![allow(dead_code)]

pub mod device;
pub mod launcher;
pub mod rewrite;

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

const STDLIB: &str = include_str!("metal_stdlib.hpp");
const RUNTIME_H: &str = include_str!("runtime.h");
const RUNTIME_CPP: &str = include_str!("runtime.cpp");

const CXX: &str = "g++";
const KERNEL_FLAGS: &[&str] = &[
    "-std=gnu++20",
    "-O2",
    "-fPIC",
    "-fsanitize=thread",
    "--param=tsan-instrument-func-entry-exit=0",
    "-fno-crossjumping",
    "-fno-tree-tail-merge",
    "-fno-thread-jumps",
    "-fno-reorder-blocks",
    "-fno-reorder-blocks-and-partition",
    "-fno-strict-aliasing",
    "-fno-exceptions",
    "-fno-rtti",
];
const RUNTIME_FLAGS: &[&str] = &["-std=gnu++20", "-O2", "-fPIC", "-shared", "-pthread"];

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{program}: {log}")]
    Compile { program: String, log: String },
    #[error("{program}: {error}")]
    Rewrite {
        program: String,
        error: rewrite::RewriteError,
    },
    #[error("loading {path}: {reason}")]
    Load { path: String, reason: String },
    #[error("{program} has no kernel {kernel} (it has {known:?})")]
    UnknownKernel {
        program: String,
        kernel: String,
        known: Vec<String>,
    },
    #[error("{kernel}: {reason}")]
    Dispatch { kernel: String, reason: String },
}

/// The order the threads of a threadgroup (and the threadgroups) take turns in: a kernel whose
/// result depends on it has a race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Each thread in index order runs until it waits; a SIMD-group whose call completes runs
    /// ahead of the later ones up to its next wait.
    Forward,
    /// The same from the last thread (and threadgroup) down.
    Reverse,
    /// Threads chosen at random (from this seed), also switched at memory accesses.
    Random(u64),
}

impl Order {
    pub const BOTH: [Order; 2] = [Order::Forward, Order::Reverse];

    /// Forward, reverse, then `random` seeded random interleavings (seeds 1, 2, …).
    pub fn schedules(random: u64) -> Vec<Order> {
        let mut orders = Order::BOTH.to_vec();
        orders.extend((1..=random).map(Order::Random));
        orders
    }

    /// Random interleavings per kernel test: MSL_SIM_SCHEDULES, else `default`.
    pub fn random_schedules(default: u64) -> u64 {
        std::env::var("MSL_SIM_SCHEDULES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
}

/// What the runtime counted during one dispatch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Counts {
    pub divergent_simd_calls: u64,
    pub divergent_barriers: u64,
    pub simd_calls: u64,
    pub barriers: u64,
    /// Switches to another thread at a memory access (random schedules only).
    pub interleavings: u64,
    /// The most threadgroup memory one threadgroup declared.
    pub threadgroup_bytes: u64,
}

impl Counts {
    /// Fails unless every SIMD-group call and barrier was made by all the threads it needs and
    /// the threadgroup memory fits Apple GPUs' 32 KiB.
    pub fn converged(&self) -> Result<(), String> {
        if self.divergent_simd_calls == 0
            && self.divergent_barriers == 0
            && self.threadgroup_bytes <= 32 * 1024
        {
            Ok(())
        } else {
            Err(format!("{self:?}"))
        }
    }
}

#[repr(C)]
struct RawLaunch {
    kernel: extern "C" fn(),
    threadgroups: [u32; 3],
    threads_per_threadgroup: [u32; 3],
    buffers: *const *mut u8,
    buffer_count: u32,
    schedule: u32,
    workers: u32,
    seed: u64,
}

#[repr(C)]
struct RawReport {
    counts: Counts,
    error: [c_char; 512],
}

#[repr(C)]
struct RawKernel {
    name: *const c_char,
    run: Option<extern "C" fn()>,
}

type RunFn = unsafe extern "C" fn(*const RawLaunch, *mut RawReport) -> c_int;

const RTLD_NOW: c_int = 2;
const RTLD_GLOBAL: c_int = 0x100;

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}

extern "C" {
    fn mmap(
        addr: *mut c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        off: i64,
    ) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
    fn mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int;
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message owned by the loader.
    unsafe {
        let message = dlerror();
        if message.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(message).to_string_lossy().into_owned()
        }
    }
}

fn load(path: &Path, flags: c_int) -> Result<*mut c_void, SimError> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| SimError::Load {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    // SAFETY: the path is NUL-terminated; the library is ours (its constructors do nothing).
    let handle = unsafe { dlopen(c_path.as_ptr(), flags) };
    if handle.is_null() {
        return Err(SimError::Load {
            path: path.display().to_string(),
            reason: dl_error(),
        });
    }
    Ok(handle)
}

fn symbol(handle: *mut c_void, name: &CStr, path: &Path) -> Result<*mut c_void, SimError> {
    // SAFETY: handle came from dlopen and name is NUL-terminated.
    let found = unsafe { dlsym(handle, name.as_ptr()) };
    if found.is_null() {
        return Err(SimError::Load {
            path: path.display().to_string(),
            reason: format!("no symbol {name:?}"),
        });
    }
    Ok(found)
}

/// FNV-1a: a stable content hash for cache names (std's hasher may change between releases).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in *part {
            hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        hash = (hash ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn io<T>(what: impl std::fmt::Display, result: std::io::Result<T>) -> Result<T, SimError> {
    result.map_err(|e| SimError::Io(what.to_string(), e))
}

/// Writes `contents` to `path` through a temporary name, so that concurrent test processes never
/// see a half-written file.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), SimError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    io(tmp.display(), std::fs::write(&tmp, contents))?;
    io(path.display(), std::fs::rename(&tmp, path))
}

fn run_compiler(program: &str, args: &[&std::ffi::OsStr]) -> Result<Vec<u8>, SimError> {
    let output = io(CXX, Command::new(CXX).args(args).output())?;
    if !output.status.success() {
        return Err(SimError::Compile {
            program: program.into(),
            log: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(output.stdout)
}

/// The shim headers and the loaded runtime, set up once per process.
struct Toolchain {
    dir: PathBuf,
    include: PathBuf,
    run: RunFn,
    /// Hash of the headers, the flags and the compiler version: part of every program's key.
    key: u64,
}

fn toolchain() -> Result<&'static Toolchain, SimError> {
    static TOOLCHAIN: OnceLock<Result<Toolchain, String>> = OnceLock::new();
    TOOLCHAIN
        .get_or_init(|| Toolchain::set_up().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| SimError::Load {
            path: "msl_sim runtime".into(),
            reason: e.clone(),
        })
}

impl Toolchain {
    fn set_up() -> Result<Toolchain, SimError> {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("msl_sim");
        io(dir.display(), std::fs::create_dir_all(&dir))?;
        let version = io(CXX, Command::new(CXX).arg("--version").output())?.stdout;
        let swizzles: Vec<String> = (2..=4).map(rewrite::swizzles).collect();
        let flags = format!("{KERNEL_FLAGS:?}{RUNTIME_FLAGS:?}");
        let mut parts: Vec<&[u8]> = vec![
            STDLIB.as_bytes(),
            RUNTIME_H.as_bytes(),
            RUNTIME_CPP.as_bytes(),
            flags.as_bytes(),
            &version,
        ];
        parts.extend(swizzles.iter().map(|s| s.as_bytes()));
        let key = fnv1a(&parts);
        let include = dir.join(format!("include-{key:016x}"));
        io(include.display(), std::fs::create_dir_all(&include))?;
        let mut files = vec![
            ("metal_stdlib.hpp".to_string(), STDLIB),
            ("runtime.h".to_string(), RUNTIME_H),
            ("runtime.cpp".to_string(), RUNTIME_CPP),
        ];
        for (n, text) in (2..=4).zip(&swizzles) {
            files.push((format!("swizzles{n}.inc"), text));
        }
        for (name, text) in &files {
            let path = include.join(name);
            if !path.exists() {
                write_atomically(&path, text.as_bytes())?;
            }
        }
        let library = dir.join(format!("runtime-{key:016x}.so"));
        if !library.exists() {
            let tmp = library.with_extension(format!("tmp{}.so", std::process::id()));
            let cpp = include.join("runtime.cpp");
            let mut args: Vec<&std::ffi::OsStr> =
                RUNTIME_FLAGS.iter().map(std::ffi::OsStr::new).collect();
            args.extend([cpp.as_os_str(), "-o".as_ref(), tmp.as_os_str()]);
            run_compiler("runtime.cpp", &args)?;
            io(library.display(), std::fs::rename(&tmp, &library))?;
        }
        // Global: the kernels' libraries resolve the runtime's symbols against it.
        let handle = load(&library, RTLD_NOW | RTLD_GLOBAL)?;
        let run = symbol(handle, c"msl_sim_run", &library)?;
        Ok(Toolchain {
            dir,
            include,
            // SAFETY: msl_sim_run has this signature (runtime.h).
            run: unsafe { std::mem::transmute::<*mut c_void, RunFn>(run) },
            key,
        })
    }

    fn build(&self, name: &str, source: &str) -> Result<Program, SimError> {
        let key = fnv1a(&[&self.key.to_le_bytes(), name.as_bytes(), source.as_bytes()]);
        let stem = self.dir.join(format!("{name}-{key:016x}"));
        let library = stem.with_extension("so");
        if !library.exists() {
            self.compile(name, source, &stem, &library)?;
        }
        Program::load(name, &library, self.run)
    }

    fn compile(
        &self,
        name: &str,
        source: &str,
        stem: &Path,
        library: &Path,
    ) -> Result<(), SimError> {
        // The shim replaces Metal's headers; blank lines keep the line numbers.
        let without_includes: String = source
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("#include <metal_") {
                    ""
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let metal = stem.with_extension("metal");
        write_atomically(&metal, without_includes.as_bytes())?;
        let preprocessed = run_compiler(
            name,
            &[
                "-E".as_ref(),
                "-x".as_ref(),
                "c++".as_ref(),
                "-std=gnu++20".as_ref(),
                "-D__METAL_VERSION__=310".as_ref(),
                metal.as_os_str(),
            ],
        )?;
        let rewritten =
            rewrite::rewrite(&String::from_utf8_lossy(&preprocessed)).map_err(|error| {
                SimError::Rewrite {
                    program: name.into(),
                    error,
                }
            })?;
        let cpp = stem.with_extension("cpp");
        let text = format!(
            "#include \"metal_stdlib.hpp\"\nusing namespace metal;\n{}",
            rewritten.cpp
        );
        write_atomically(&cpp, text.as_bytes())?;
        let object = library.with_extension(format!("tmp{}.o", std::process::id()));
        let include = format!("-I{}", self.include.display());
        let mut args: Vec<&std::ffi::OsStr> =
            KERNEL_FLAGS.iter().map(std::ffi::OsStr::new).collect();
        args.extend([
            include.as_ref(),
            "-c".as_ref(),
            cpp.as_os_str(),
            "-o".as_ref(),
            object.as_os_str(),
        ]);
        run_compiler(name, &args)?;
        // Linked apart, so that g++ adds no sanitizer runtime: the runtime's hooks serve.
        let tmp = library.with_extension(format!("tmp{}.so", std::process::id()));
        run_compiler(
            name,
            &[
                "-shared".as_ref(),
                object.as_os_str(),
                "-o".as_ref(),
                tmp.as_os_str(),
                "-lm".as_ref(),
            ],
        )?;
        io(object.display(), std::fs::remove_file(&object))?;
        io(library.display(), std::fs::rename(&tmp, library))
    }
}

/// A compiled MSL source with its kernels.
pub struct Program {
    name: String,
    kernels: HashMap<String, extern "C" fn()>,
    run: RunFn,
}

// SAFETY: the kernel entries are plain functions; the runtime keeps per-dispatch state only.
unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Program {
    /// Compiles (or takes from the cache) the MSL `source`; `name` names the cached files.
    pub fn build(name: &str, source: &str) -> Result<Arc<Program>, SimError> {
        type Cell = Arc<OnceLock<Result<Arc<Program>, String>>>;
        static PROGRAMS: OnceLock<Mutex<HashMap<(String, u64), Cell>>> = OnceLock::new();
        let toolchain = toolchain()?;
        let key = (name.to_string(), fnv1a(&[source.as_bytes()]));
        let cell: Cell = {
            let mut programs = PROGRAMS
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            Arc::clone(programs.entry(key).or_default())
        };
        cell.get_or_init(|| {
            toolchain
                .build(name, source)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|log| SimError::Compile {
            program: name.into(),
            log,
        })
    }

    fn load(name: &str, library: &Path, run: RunFn) -> Result<Program, SimError> {
        let handle = load(library, RTLD_NOW)?;
        let table = symbol(handle, c"msl_sim_kernels", library)? as *const RawKernel;
        let mut kernels = HashMap::new();
        // SAFETY: the rewriter emits a table of {name, run} ending with {nullptr, nullptr}.
        unsafe {
            let mut entry = table;
            while !(*entry).name.is_null() {
                let kernel_name = CStr::from_ptr((*entry).name).to_string_lossy().into_owned();
                if let Some(run) = (*entry).run {
                    kernels.insert(kernel_name, run);
                }
                entry = entry.add(1);
            }
        }
        Ok(Program {
            name: name.into(),
            kernels,
            run,
        })
    }

    /// Runs `kernel` over `threadgroups` groups of `threads_per_threadgroup` threads, with
    /// `buffers[n]` bound to `[[buffer(n)]]`.
    pub fn dispatch(
        &self,
        kernel: &str,
        threadgroups: [u32; 3],
        threads_per_threadgroup: [u32; 3],
        buffers: &[&DeviceBuffer],
        order: Order,
    ) -> Result<Counts, SimError> {
        let entry = *self
            .kernels
            .get(kernel)
            .ok_or_else(|| SimError::UnknownKernel {
                program: self.name.clone(),
                kernel: kernel.into(),
                known: self.kernels.keys().cloned().collect(),
            })?;
        if threadgroups.contains(&0) {
            return Ok(Counts::default());
        }
        let pointers: Vec<*mut u8> = buffers.iter().map(|b| b.data).collect();
        let launch = RawLaunch {
            kernel: entry,
            threadgroups,
            threads_per_threadgroup,
            buffers: pointers.as_ptr(),
            buffer_count: pointers.len() as u32,
            schedule: match order {
                Order::Forward => 0,
                Order::Reverse => 1,
                Order::Random(_) => 2,
            },
            workers: workers(),
            seed: match order {
                Order::Random(seed) => seed,
                _ => 0,
            },
        };
        let mut report = RawReport {
            counts: Counts::default(),
            error: [0; 512],
        };
        // SAFETY: the launch points at live buffers for the whole call; the report is ours.
        let status = unsafe { (self.run)(&launch, &mut report) };
        if status != 0 {
            // SAFETY: the runtime NUL-terminates its message within the array.
            let reason = unsafe { CStr::from_ptr(report.error.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            return Err(SimError::Dispatch {
                kernel: kernel.into(),
                reason,
            });
        }
        Ok(report.counts)
    }
}

/// OS threads a dispatch spreads its threadgroups over (MSL_SIM_WORKERS, default 2).
fn workers() -> u32 {
    static WORKERS: OnceLock<u32> = OnceLock::new();
    *WORKERS.get_or_init(|| {
        std::env::var("MSL_SIM_WORKERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2)
    })
}

/// Device memory for simulated kernels, ending right at an inaccessible page so that a read
/// past the end (beyond the 16-byte rounding) crashes instead of passing unnoticed.
pub struct DeviceBuffer {
    map: *mut u8,
    map_len: usize,
    data: *mut u8,
    len: usize,
}

// SAFETY: the buffer owns its mapping; kernels and the host take turns on it.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub fn zeroed(len: usize) -> DeviceBuffer {
        const PAGE: usize = 4096;
        let rounded = len.max(16).div_ceil(16) * 16;
        let map_len = rounded.div_ceil(PAGE) * PAGE + PAGE;
        // SAFETY: a fresh anonymous mapping (zero-filled); its last page becomes the guard.
        let map = unsafe {
            let map = mmap(std::ptr::null_mut(), map_len, 1 | 2, 0x02 | 0x20, -1, 0);
            assert!(map as isize != -1, "mmap of {map_len} bytes failed");
            let guard = (map as *mut u8).add(map_len - PAGE);
            assert_eq!(mprotect(guard as *mut c_void, PAGE, 0), 0, "mprotect");
            map as *mut u8
        };
        DeviceBuffer {
            map,
            map_len,
            // SAFETY: within the mapping, `rounded` bytes before the guard page.
            data: unsafe { map.add(map_len - PAGE - rounded) },
            len,
        }
    }

    pub fn from_bytes(bytes: &[u8]) -> DeviceBuffer {
        let buffer = DeviceBuffer::zeroed(bytes.len());
        buffer.write_bytes(0, bytes);
        buffer
    }

    pub fn from_f32(values: &[f32]) -> DeviceBuffer {
        DeviceBuffer::from_bytes(bytemuck::cast_slice(values))
    }

    pub fn from_u32(values: &[u32]) -> DeviceBuffer {
        DeviceBuffer::from_bytes(bytemuck::cast_slice(values))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len, "write past the buffer");
        // SAFETY: in bounds (checked); no kernel runs on this buffer during host access.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.data.add(offset), bytes.len()) }
    }

    pub fn write_f32(&self, index: usize, values: &[f32]) {
        self.write_bytes(index * 4, bytemuck::cast_slice(values));
    }

    pub fn bytes(&self) -> Vec<u8> {
        // SAFETY: `len` initialized bytes; no kernel runs on this buffer during host access.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }.to_vec()
    }

    pub fn f32s(&self) -> Vec<f32> {
        self.bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }

    pub fn u32s(&self) -> Vec<u32> {
        self.bytes()
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `zeroed`, unmapped once.
        unsafe {
            munmap(self.map as *mut c_void, self.map_len);
        }
    }
}
