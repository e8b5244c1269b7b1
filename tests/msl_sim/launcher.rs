//! The MSL simulator as the GPU backend's MSL kernel set: qwen35's own `impl Backend for Wgpu`
//! (which op goes to an MSL kernel, the launch code, reads, the device's status) on the wgpu
//! device here (lavapipe), with each MSL dispatch run by the simulator on host copies of the
//! buffers it binds, the ones it writes copied back. A forward of one token then runs nothing
//! but MSL; more rows (prefill) run the WGSL kernels, as on a Mac.
//!
//! A failed readback can be planted ([`SimLauncher::fail_readbacks`]); a lost device is the wgpu
//! device destroyed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use qwen35::backend::gpu::msl_kernels::Access;
use qwen35::backend::gpu::msl_ops::{Dispatch, MslDevice};
use qwen35::backend::gpu::{GpuError, GpuOptions, MslLauncher, Wgpu};

use super::device::SimDevice;
use super::{DeviceBuffer, Order};

pub struct SimLauncher {
    pub device: SimDevice,
    fail_readbacks: AtomicBool,
}

impl SimLauncher {
    pub fn new(order: Order) -> SimLauncher {
        SimLauncher {
            device: SimDevice::new(order),
            fail_readbacks: AtomicBool::new(false),
        }
    }

    /// From now on every copy of a buffer to the host fails, as a failed readback does.
    pub fn fail_readbacks(&self) {
        self.fail_readbacks.store(true, Ordering::Relaxed);
    }

    fn read(&self, gpu: &Wgpu, buffer: &wgpu::Buffer) -> Result<DeviceBuffer, GpuError> {
        if self.fail_readbacks.load(Ordering::Relaxed) {
            return Err(GpuError::Readback("planted by the test".into()));
        }
        Ok(DeviceBuffer::from_bytes(&gpu.read_buffer(buffer)?))
    }
}

impl MslLauncher for SimLauncher {
    fn launch(&self, gpu: &Wgpu, d: &Dispatch<'_, wgpu::Buffer>) -> Result<(), GpuError> {
        // One host copy per distinct buffer, so that a buffer bound twice stays one buffer.
        let mut distinct: Vec<&wgpu::Buffer> = Vec::new();
        let slots: Vec<usize> = d
            .buffers
            .iter()
            .map(|&b| match distinct.iter().position(|&seen| seen == b) {
                Some(slot) => slot,
                None => {
                    distinct.push(b);
                    distinct.len() - 1
                }
            })
            .collect();
        let host = distinct
            .iter()
            .map(|b| self.read(gpu, b))
            .collect::<Result<Vec<_>, _>>()?;
        let bound: Vec<&DeviceBuffer> = slots.iter().map(|&slot| &host[slot]).collect();
        self.device
            .dispatch(&Dispatch {
                kernel: d.kernel,
                params: d.params,
                buffers: &bound,
                threadgroups: d.threadgroups,
                bytes_read: d.bytes_read,
            })
            .map_err(|e| GpuError::Shape {
                op: d.kernel.entry(),
                detail: e.to_string(),
            })?;
        let mut written = vec![false; distinct.len()];
        for (&slot, access) in slots.iter().zip(d.kernel.buffers()) {
            if *access == Access::ReadWrite && !written[slot] {
                written[slot] = true;
                gpu.write_buffer(distinct[slot], &host[slot].bytes())?;
            }
        }
        Ok(())
    }
}

/// The GPU backend here with the simulated MSL kernel set (weights in parts of at most
/// `max_part_rows` rows, as a GPU splits those past its binding limit), and that set; None
/// without an adapter (a failure under QWEN35_REQUIRE_GPU=1).
pub fn sim_gpu(order: Order, max_part_rows: usize) -> Option<(Wgpu, Arc<SimLauncher>)> {
    // As metal::open: the MSL kernels read Q6_K blocks as the file lays them out.
    let options = GpuOptions {
        q6_k_aligned: false,
        ..GpuOptions::default()
    };
    let gpu = match Wgpu::with_options(&options) {
        Ok(gpu) => gpu,
        Err(e) if std::env::var("QWEN35_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("QWEN35_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("NOTICE: skipping the simulated MSL backend (no wgpu adapter): {e}");
            return None;
        }
    };
    let launcher = Arc::new(SimLauncher::new(order));
    let gpu = gpu
        .with_weight_parts(max_part_rows)
        .with_msl(Arc::clone(&launcher) as Arc<dyn MslLauncher>);
    Some((gpu, launcher))
}
