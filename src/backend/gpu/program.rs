//! What a dispatch runs, for the recorder's bind groups and the profile's op classes.

use super::kernels::Kernel;
use super::msl_kernels::MslKernel;

/// What a dispatch runs: a WGSL kernel or, on a Metal adapter, an MSL kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    Wgsl(Kernel),
    Msl(MslKernel),
}

impl Program {
    pub fn name(self) -> String {
        match self {
            Program::Wgsl(kernel) => kernel.name(),
            Program::Msl(kernel) => kernel.name(),
        }
    }

    /// The op class the profile counts it in.
    pub fn class(self) -> String {
        match self {
            Program::Wgsl(kernel) => kernel.class(),
            Program::Msl(kernel) => kernel.class(),
        }
    }
}
