//! `cargo bench --bench dot_row`: the CPU's fused row·x dot product for every supported type.

mod common;

use qwen35::quant::{dot_row, row_bytes, GgmlType};
use std::hint::black_box;

/// Elements per row: a typical hidden size, whole blocks of every type.
const COLS: usize = 4096;

fn main() {
    let types = (0..64)
        .filter_map(GgmlType::from_id)
        .filter(|ty| ty.is_supported());
    let x: Vec<f32> = (0..COLS).map(|i| (i % 17) as f32 / 17.0 - 0.5).collect();
    for ty in types {
        let Some(bytes) = row_bytes(ty, COLS as u64) else {
            continue;
        };
        // 0x3C in every byte is a finite, normal value for every scale and float encoding
        // (f16 0x3C3C ≈ 1.06, bf16/f32 ≈ 0.011), so no denormal or NaN slows a lane.
        let row = vec![0x3Cu8; bytes as usize];
        common::time(
            &format!("dot_row {} x{COLS}", ty.name()),
            Some(bytes),
            || dot_row(ty, black_box(&row), black_box(&x)),
        );
    }
}
