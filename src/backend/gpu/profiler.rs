//! Work counters and, when profiling is on, GPU time per op class.
//!
//! Counters (dispatches, submits) are always kept. With profiling on, every dispatch is counted
//! in its class with the bytes it reads, and — where the device writes timestamps inside compute
//! passes — a timestamp goes before each dispatch and one after the last of the pass, so that a
//! dispatch's time is the gap to the next stamp (its barrier included). The stamps are resolved
//! into a host-readable buffer with each submit and summed at the next readback, which waits for
//! the work anyway.

use std::collections::HashMap;
use std::sync::mpsc;

use super::program::Program;
use super::GpuError;
use crate::backend::{BackendStats, OpTiming};

/// The most dispatches one pass may stamp (the query set holds one more stamp for the end).
pub const MAX_STAMPED_DISPATCHES: usize = wgpu::QUERY_SET_MAX_QUERIES as usize - 1;

/// Timestamp queries of one submit, resolved and waiting to be read.
struct PendingStamps {
    readback: wgpu::Buffer,
    classes: Vec<usize>,
}

struct Timestamps {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    period_ns: f64,
}

pub struct Profiler {
    on: bool,
    dispatches: u64,
    submits: u64,
    timestamps: Option<Timestamps>,
    ops: Vec<OpTiming>,
    class_of: HashMap<(Program, Option<&'static str>), usize>,
    /// The class of each stamped dispatch of the open pass, in order.
    stamped: Vec<usize>,
    pending: Vec<PendingStamps>,
}

impl Profiler {
    /// Timestamps are used only when the device has `TIMESTAMP_QUERY_INSIDE_PASSES`.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Profiler {
        let wanted =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        let timestamps = device.features().contains(wanted).then(|| {
            let count = MAX_STAMPED_DISPATCHES as u32 + 1;
            Timestamps {
                queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("dispatch timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count,
                }),
                resolved: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("resolved timestamps"),
                    size: count as u64 * wgpu::QUERY_SIZE as u64,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                }),
                period_ns: queue.get_timestamp_period() as f64,
            }
        });
        Profiler {
            on: false,
            dispatches: 0,
            submits: 0,
            timestamps,
            ops: Vec::new(),
            class_of: HashMap::new(),
            stamped: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub fn set_on(&mut self, on: bool) {
        self.on = on;
    }

    /// Counts a dispatch of `program` (in `class`, or the program's own) reading `bytes_read`,
    /// stamping the pass first when profiling with timestamps.
    pub fn before_dispatch(
        &mut self,
        pass: &mut wgpu::ComputePass<'static>,
        program: Program,
        class: Option<&'static str>,
        bytes_read: u64,
    ) {
        self.dispatches += 1;
        if !self.on {
            return;
        }
        let class = self.class_index(program, class);
        if let Some(op) = self.ops.get_mut(class) {
            op.calls += 1;
            op.bytes_read += bytes_read;
        }
        if let Some(ts) = &self.timestamps {
            if self.stamped.len() < MAX_STAMPED_DISPATCHES {
                pass.write_timestamp(&ts.queries, self.stamped.len() as u32);
                self.stamped.push(class);
            }
        }
    }

    fn class_index(&mut self, program: Program, class: Option<&'static str>) -> usize {
        let ops = &mut self.ops;
        *self.class_of.entry((program, class)).or_insert_with(|| {
            let class = class.map_or_else(|| program.class(), String::from);
            match ops.iter().position(|op| op.class == class) {
                Some(existing) => existing,
                None => {
                    ops.push(OpTiming {
                        class,
                        ..OpTiming::default()
                    });
                    ops.len() - 1
                }
            }
        })
    }

    /// The closing stamp, written into the pass before it ends.
    pub fn end_pass(&mut self, pass: &mut wgpu::ComputePass<'static>) {
        if let (Some(ts), false) = (&self.timestamps, self.stamped.is_empty()) {
            pass.write_timestamp(&ts.queries, self.stamped.len() as u32);
        }
    }

    /// Counts a submit and appends the resolve of the pass's stamps to its encoder.
    pub fn before_submit(&mut self, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) {
        self.submits += 1;
        let Some(ts) = &self.timestamps else {
            return;
        };
        if self.stamped.is_empty() {
            return;
        }
        let stamps = self.stamped.len() as u32 + 1;
        let bytes = stamps as u64 * wgpu::QUERY_SIZE as u64;
        encoder.resolve_query_set(&ts.queries, 0..stamps, &ts.resolved, 0);
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamp readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(&ts.resolved, 0, &readback, 0, bytes);
        self.pending.push(PendingStamps {
            readback,
            classes: std::mem::take(&mut self.stamped),
        });
    }

    /// Adds the time of every submitted stamp to its class, waiting for the submits if needed.
    pub fn collect(&mut self, device: &wgpu::Device) -> Result<(), GpuError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let period_ns = self.timestamps.as_ref().map_or(1.0, |ts| ts.period_ns);
        let pending = std::mem::take(&mut self.pending);
        let (sender, receiver) = mpsc::channel();
        for stamps in &pending {
            let sender = sender.clone();
            stamps
                .readback
                .map_async(wgpu::MapMode::Read, .., move |result| {
                    // A failed send means the collector gave up; nobody needs the result.
                    let _ = sender.send(result);
                });
        }
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        for _ in &pending {
            receiver
                .recv()
                .map_err(|e| GpuError::Readback(e.to_string()))?
                .map_err(|e| GpuError::Readback(e.to_string()))?;
        }
        for stamps in pending {
            let ticks: Vec<u64> = {
                let bytes = stamps
                    .readback
                    .get_mapped_range(..)
                    .map_err(|e| GpuError::Readback(e.to_string()))?;
                bytes
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect()
            };
            for (&class, pair) in stamps.classes.iter().zip(ticks.windows(2)) {
                if let Some(op) = self.ops.get_mut(class) {
                    op.seconds += pair[1].saturating_sub(pair[0]) as f64 * period_ns * 1e-9;
                }
            }
        }
        Ok(())
    }

    /// The counters since the last call, which resets them (classes restart in first-seen order).
    /// The caller submits the open pass first, so that no stamp refers to a class handed out.
    pub fn take(&mut self, device: &wgpu::Device) -> Result<BackendStats, GpuError> {
        self.collect(device)?;
        self.class_of.clear();
        Ok(BackendStats {
            dispatches: std::mem::take(&mut self.dispatches),
            submits: std::mem::take(&mut self.submits),
            ops: std::mem::take(&mut self.ops),
        })
    }
}
