//! Weight formats: ggml type ids, block geometry, row dequantization, fused row·x dot products,
//! and quantizers for the formats the fixtures and synthetic models need.
//!
//! CONTRACT (other modules code against exactly these signatures):
//! - `GgmlType`: every ggml type id that a GGUF may name, with `from_id`, `id`, `name`,
//!   `block_elems`, `block_bytes`, `is_supported` (true for F32, F16, BF16, Q8_0, Q4_0, Q5_0,
//!   Q4_K, Q5_K, Q6_K).
//! - `row_bytes(ty, n_elems: u64) -> Option<u64>`: None if n is not a multiple of the block size or overflows.
//! - `dequantize_row(ty, bytes, out: &mut [f32]) -> Result<(), QuantError>`
//! - `dot_row(ty, bytes, x: &[f32]) -> Result<f32, QuantError>` (never materializes the row)
//! - `quantize_row(ty, x: &[f32], out: &mut Vec<u8>) -> Result<(), QuantError>` (F32, F16, BF16, Q8_0, Q4_K, Q6_K)

mod ggml_type;
pub use ggml_type::{row_bytes, GgmlType};
