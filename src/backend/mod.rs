//! (placeholder; being written)
pub mod gpu;
