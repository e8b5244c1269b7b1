//! Run-time choice between the baseline build of the f32 row code and one compiled for AVX2 and
//! FMA. Both builds run the same Rust code: the compiler only gets wider vectors (it never fuses
//! a multiply and an add on its own), so results are bit-identical across machines.

use super::{
    dequantize_row_unchecked, dot_f32_tokens_unchecked, dot_row_unchecked, GgmlType, QuantError,
};

/// Whether this CPU runs AVX2 and FMA; detected once.
#[cfg(target_arch = "x86_64")]
pub(super) fn has_avx2_fma() -> bool {
    static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DETECTED.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    })
}

#[cfg(target_arch = "x86_64")]
pub(super) fn dot_row(ty: GgmlType, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        unsafe { dot_row_avx2(ty, bytes, x) }
    } else {
        dot_row_unchecked(ty, bytes, x)
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) fn dequantize_row(
    ty: GgmlType,
    bytes: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        unsafe { dequantize_row_avx2(ty, bytes, out) }
    } else {
        dequantize_row_unchecked(ty, bytes, out)
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) fn dot_f32_tokens(w: &[f32], xs: &[&[f32]], out: &mut [f32]) {
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        unsafe { dot_f32_tokens_avx2(w, xs, out) }
    } else {
        dot_f32_tokens_unchecked(w, xs, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_f32_tokens_avx2(w: &[f32], xs: &[&[f32]], out: &mut [f32]) {
    dot_f32_tokens_unchecked(w, xs, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_row_avx2(ty: GgmlType, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    dot_row_unchecked(ty, bytes, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dequantize_row_avx2(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    dequantize_row_unchecked(ty, bytes, out)
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn dot_row(ty: GgmlType, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    dot_row_unchecked(ty, bytes, x)
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn dequantize_row(
    ty: GgmlType,
    bytes: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    dequantize_row_unchecked(ty, bytes, out)
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn dot_f32_tokens(w: &[f32], xs: &[&[f32]], out: &mut [f32]) {
    dot_f32_tokens_unchecked(w, xs, out)
}
