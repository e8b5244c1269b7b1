//! The Metal fast path: hand-written MSL kernels (`msl/`) for the decode ops.
//!
//! [`crate::backend::gpu::msl_kernels`] says which files compose each kernel and how it is
//! launched; [`ops`] is the host side of every op, written once against [`ops::MslDevice`], so
//! that the MSL simulator in the tests runs the same launch code and the same backend glue
//! ([`Metal`]) as a Mac, which records them through wgpu's MSL passthrough.

mod backend;
pub mod ops;

pub use crate::backend::gpu::msl_kernels::{Access, MslFile, MslFormat, MslKernel};
pub use backend::{Metal, MetalDevice, MetalError};
pub use ops::{Dispatch, MslDevice, WeightLayout, WeightPart};
