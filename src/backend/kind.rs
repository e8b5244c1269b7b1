//! Which backend runs the model, and which is the fastest this machine has.

use std::str::FromStr;

use super::gpu::GpuOptions;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The exact f32 reference.
    Cpu,
    /// The CPU with 14-bit activations in the K-quant and Q8_0 matmuls (faster, not exact).
    CpuFast,
    Wgpu,
    Metal,
}

/// How the chosen backend is set up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendOptions {
    /// CPU threads (0: one per core).
    pub threads: usize,
    /// The wgpu (and Metal) backend's settings.
    pub gpu: GpuOptions,
}

#[derive(Debug, thiserror::Error)]
#[error("unknown backend {0:?} (expected cpu, cpu-fast, wgpu or metal)")]
pub struct UnknownBackend(pub String);

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::CpuFast => "cpu-fast",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Metal => "metal",
        }
    }

    /// The fastest backend here, and why: wgpu on a GPU adapter (the one wgpu would open, as
    /// `WGPU_BACKEND` and `WGPU_ADAPTER_NAME` narrow it), else the CPU's fast mode (a CPU
    /// adapter such as lavapipe is slower than the CPU backend itself).
    pub fn fastest_available() -> (BackendKind, String) {
        match super::gpu::adapter_info() {
            Ok(info) if info.device_type != wgpu::DeviceType::Cpu => (
                BackendKind::Wgpu,
                format!("the GPU {} ({:?})", info.name, info.backend),
            ),
            Ok(info) => (
                BackendKind::CpuFast,
                format!("no GPU adapter, only the CPU adapter {}", info.name),
            ),
            Err(_) => (BackendKind::CpuFast, "no GPU adapter".into()),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<BackendKind, UnknownBackend> {
        match s {
            "cpu" => Ok(BackendKind::Cpu),
            "cpu-fast" => Ok(BackendKind::CpuFast),
            "wgpu" => Ok(BackendKind::Wgpu),
            "metal" => Ok(BackendKind::Metal),
            other => Err(UnknownBackend(other.to_string())),
        }
    }
}
