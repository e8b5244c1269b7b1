//! Weight formats: hand-built blocks, gguf-py cross-checks, fused dots, quantizer quality and
//! length errors. Test vectors come from scripts/make_quant_vectors.py.

use std::path::PathBuf;

use qwen35::quant::{dequantize, dequantize_row, dot_row, quantize_row, GgmlType, QuantError};

const SUPPORTED: [GgmlType; 9] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

const QUANTIZABLE: [GgmlType; 7] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// xorshift64* with Box-Muller: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }

    fn normals(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.normal()).collect()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

fn f16_bytes(value: f32) -> [u8; 2] {
    half::f16::from_f32(value).to_le_bytes()
}

fn decode(ty: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / ty.block_bytes() * ty.block_elems();
    dequantize(ty, bytes, n).unwrap()
}

fn quantize(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    quantize_row(ty, x, &mut out).unwrap();
    out
}

// ---------------------------------------------------------------------------------------------
// Hand-built blocks, expected values from the format definitions.

#[test]
fn float_formats_decode_by_definition() {
    let f32_bytes: Vec<u8> = [1.5f32, -2.0, f32::MIN_POSITIVE]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(
        decode(GgmlType::F32, &f32_bytes),
        [1.5, -2.0, f32::MIN_POSITIVE]
    );
    // 1.0, -2.0, the smallest subnormal 2^-24, 65504, +inf.
    let f16_bytes = [0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b, 0x00, 0x7c];
    assert_eq!(
        decode(GgmlType::F16, &f16_bytes),
        [1.0, -2.0, 2f32.powi(-24), 65504.0, f32::INFINITY]
    );
    // BF16 is the top half of an f32: 1.0, -5.0, 2^-133 (an f32 subnormal).
    let bf16_bytes = [0x80, 0x3f, 0xa0, 0xc0, 0x01, 0x00];
    assert_eq!(
        decode(GgmlType::BF16, &bf16_bytes),
        [1.0, -5.0, f32::from_bits(0x0001_0000)]
    );
}

#[test]
fn q8_0_block_is_scale_times_signed_bytes() {
    let mut block = f16_bytes(0.5).to_vec();
    block.extend((0..32).map(|j| [-128i8, 127, -1, 0][j % 4].wrapping_add(j as i8 / 4) as u8));
    let expected: Vec<f32> = (0..32)
        .map(|j| 0.5 * f32::from([-128i8, 127, -1, 0][j % 4].wrapping_add(j as i8 / 4)))
        .collect();
    assert_eq!(decode(GgmlType::Q8_0, &block), expected);
}

#[test]
fn q4_0_block_splits_nibbles_into_halves() {
    let mut block = f16_bytes(2.0).to_vec();
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let values = decode(GgmlType::Q4_0, &block);
    for j in 0..16 {
        assert_eq!(values[j], 2.0 * (j as f32 - 8.0), "element {j}");
        assert_eq!(values[j + 16], 2.0 * (7.0 - j as f32), "element {}", j + 16);
    }
}

#[test]
fn q5_0_block_takes_fifth_bit_from_little_endian_u32() {
    let high_bits: u32 = 0x8001_0003; // elements 0, 1, 16 and 31
    let mut block = f16_bytes(-1.0).to_vec();
    block.extend(high_bits.to_le_bytes());
    block.extend([0x5a; 16]); // low nibble 10, high nibble 5
    let values = decode(GgmlType::Q5_0, &block);
    for (i, value) in values.iter().enumerate() {
        let nibble = if i < 16 { 10.0 } else { 5.0 };
        let fifth = if [0, 1, 16, 31].contains(&i) {
            16.0
        } else {
            0.0
        };
        assert_eq!(*value, -(nibble + fifth - 16.0), "element {i}");
    }
}

/// Packed Q4_K/Q5_K scales with a set bit pattern in every field, and the 6-bit scales and
/// mins they hold, worked out by hand: runs 0..4 from the low six bits of bytes 0..8, runs
/// 4..8 from the nibbles of bytes 8..12 plus the top two bits of bytes 0..8.
const PACKED_SCALES: [u8; 12] = [
    0xc1, 0x42, 0x03, 0x84, 0x05, 0xc6, 0x47, 0x08, 0x9a, 0x0b, 0xfc, 0x5d,
];
const RUN_SCALES: [f32; 8] = [1.0, 2.0, 3.0, 4.0, 58.0, 27.0, 12.0, 45.0];
const RUN_MINS: [f32; 8] = [5.0, 6.0, 7.0, 8.0, 9.0, 48.0, 31.0, 5.0];

fn k_quant_header() -> Vec<u8> {
    let mut block = f16_bytes(0.5).to_vec();
    block.extend(f16_bytes(0.25));
    block.extend(PACKED_SCALES);
    block
}

fn q4_k_nibbles() -> Vec<u8> {
    (0..128usize)
        .map(|i| (i as u8 & 0x0f) | ((((i % 32) + i / 32) as u8 & 0x0f) << 4))
        .collect()
}

#[test]
fn q4_k_block_applies_each_packed_scale_and_min() {
    let qs = q4_k_nibbles();
    let mut block = k_quant_header();
    block.extend(&qs);
    let values = decode(GgmlType::Q4_K, &block);
    for group in 0..4 {
        for l in 0..32 {
            let byte = qs[32 * group + l];
            for (half, q) in [(0, byte & 0x0f), (1, byte >> 4)] {
                let run = 2 * group + half;
                let expected = 0.5 * RUN_SCALES[run] * f32::from(q) - 0.25 * RUN_MINS[run];
                assert_eq!(
                    values[64 * group + 32 * half + l],
                    expected,
                    "run {run} l {l}"
                );
            }
        }
    }
}

#[test]
fn q5_k_block_adds_high_bit_per_run() {
    let qs = q4_k_nibbles();
    let qh: Vec<u8> = (0..32u8).map(|l| l.wrapping_mul(37) ^ 0xa5).collect();
    let mut block = k_quant_header();
    block.extend(&qh);
    block.extend(&qs);
    let values = decode(GgmlType::Q5_K, &block);
    for group in 0..4 {
        for l in 0..32 {
            let byte = qs[32 * group + l];
            for (half, nibble) in [(0, byte & 0x0f), (1, byte >> 4)] {
                let run = 2 * group + half;
                let high = if qh[l] & (1 << run) != 0 { 16.0 } else { 0.0 };
                let q = f32::from(nibble) + high;
                let expected = 0.5 * RUN_SCALES[run] * q - 0.25 * RUN_MINS[run];
                assert_eq!(
                    values[64 * group + 32 * half + l],
                    expected,
                    "run {run} l {l}"
                );
            }
        }
    }
}

#[test]
fn q6_k_block_has_signed_scales_and_trailing_d() {
    let ql: Vec<u8> = (0..128u32).map(|i| (i * 7 + 3) as u8).collect();
    let qh: Vec<u8> = (0..64u32).map(|i| (i * 13 + 1) as u8).collect();
    let scales: [i8; 16] = [
        -128, -3, 5, 127, 1, -1, 64, -64, 2, -2, 100, -100, 0, 7, -7, 33,
    ];
    let mut block = [ql.clone(), qh.clone()].concat();
    block.extend(scales.iter().map(|&s| s as u8));
    block.extend(f16_bytes(0.125));
    assert_eq!(block.len(), 210);
    let values = decode(GgmlType::Q6_K, &block);
    for n in 0..2 {
        for l in 0..32 {
            let (low_a, low_b, high) = (ql[64 * n + l], ql[64 * n + l + 32], qh[32 * n + l]);
            let quarters = [
                (low_a & 0x0f) | ((high & 3) << 4),
                (low_b & 0x0f) | (((high >> 2) & 3) << 4),
                (low_a >> 4) | (((high >> 4) & 3) << 4),
                (low_b >> 4) | (((high >> 6) & 3) << 4),
            ];
            for (k, q) in quarters.into_iter().enumerate() {
                let scale = f32::from(scales[8 * n + l / 16 + 2 * k]);
                let expected = 0.125 * scale * (f32::from(q) - 32.0);
                assert_eq!(
                    values[128 * n + 32 * k + l],
                    expected,
                    "half {n} quarter {k} l {l}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cross-checks against gguf-py.

fn vector(name: &str) -> Vec<u8> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "data", "quant", name]
        .iter()
        .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn vector_f32(name: &str) -> Vec<f32> {
    vector(name)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn assert_same_floats(ty: GgmlType, actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len(), "{ty:?}");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let same = a.to_bits() == e.to_bits() || (a.is_nan() && e.is_nan());
        assert!(same, "{ty:?} element {i}: {a:e} vs gguf-py {e:e}");
    }
}

#[test]
fn dequantization_matches_gguf_py_bit_for_bit() {
    for ty in &SUPPORTED[1..] {
        let name = format!("{ty:?}");
        let blocks = vector(&format!("{name}.blocks"));
        let expected = vector_f32(&format!("{name}.f32"));
        assert!(!expected.is_empty());
        assert_same_floats(*ty, &decode(*ty, &blocks), &expected);
    }
}

#[test]
fn quantizers_match_gguf_py_bit_for_bit() {
    let input = vector_f32("quantize_in.f32");
    for ty in [GgmlType::Q8_0, GgmlType::BF16, GgmlType::F16] {
        let expected = vector(&format!("{ty:?}.quantize_out.blocks"));
        assert_eq!(quantize(ty, &input), expected, "{ty:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fused dot products.

/// A random row of `n_blocks` blocks: random bytes with finite, model-sized f16 scales.
fn random_row(ty: GgmlType, n_blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let n = n_blocks * ty.block_elems();
    if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        return quantize(ty, &rng.normals(n));
    }
    let scale_offsets: &[usize] = match ty {
        GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[0],
    };
    let mut row = rng.bytes(n_blocks * ty.block_bytes());
    for block in row.chunks_exact_mut(ty.block_bytes()) {
        for &offset in scale_offsets {
            let scale = f16_bytes(0.02 * rng.normal());
            block[offset..offset + 2].copy_from_slice(&scale);
        }
    }
    row
}

#[test]
fn dot_row_equals_dot_of_dequantized_row() {
    let mut rng = Rng(0x5eed);
    for ty in SUPPORTED {
        for n_blocks in [1, 3, 20, 67] {
            let row = random_row(ty, n_blocks, &mut rng);
            let weights = decode(ty, &row);
            let x = rng.normals(weights.len());
            let exact: f64 = weights.iter().zip(&x).map(|(w, x)| f64::from(w * x)).sum();
            let magnitude: f64 = weights
                .iter()
                .zip(&x)
                .map(|(w, x)| f64::from((w * x).abs()))
                .sum();
            let fused = f64::from(dot_row(ty, &row, &x).unwrap());
            assert!(
                (fused - exact).abs() <= 1e-6 * magnitude + 1e-30,
                "{ty:?} {n_blocks} blocks: {fused} vs {exact} (sum |w·x| = {magnitude})"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Quantizer quality and robustness.

fn relative_rmse(x: &[f32], y: &[f32]) -> f64 {
    let error: f64 = x.iter().zip(y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
    let energy: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
    (error / energy).sqrt()
}

fn round_trip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    decode(ty, &quantize(ty, x))
}

#[test]
fn quantizers_round_trip_normal_data_within_bounds() {
    let mut rng = Rng(42);
    let x = rng.normals(64 * 256);
    let bounds = [
        (GgmlType::F32, 0.0),
        (GgmlType::F16, 3e-4),
        (GgmlType::BF16, 2.5e-3),
        (GgmlType::Q8_0, 6.5e-3),
        (GgmlType::Q6_K, 2.0e-2),
        (GgmlType::Q4_K, 8.0e-2),
        (GgmlType::Q5_K, 4.0e-2),
    ];
    for (ty, bound) in bounds {
        let error = relative_rmse(&x, &round_trip(ty, &x));
        println!("{ty:?}: relative RMSE {error:.5}");
        assert!(error <= bound, "{ty:?}: relative RMSE {error} > {bound}");
    }
}

#[test]
fn q4_k_search_beats_min_max_scaling() {
    // Min/max scaling of each run of 32 (the baseline the scale search must improve on):
    // levels spread evenly from the run's minimum to its maximum.
    let mut rng = Rng(7);
    let x = rng.normals(16 * 256);
    let min_max: Vec<f32> = x
        .chunks_exact(32)
        .flat_map(|run| {
            let lo = run.iter().fold(0.0f32, |a, &b| a.min(b));
            let hi = run.iter().fold(0.0f32, |a, &b| a.max(b));
            let step = (hi - lo) / 15.0;
            run.iter()
                .map(move |v| ((v - lo) / step).round() * step + lo)
        })
        .collect();
    let searched = relative_rmse(&x, &round_trip(GgmlType::Q4_K, &x));
    let baseline = relative_rmse(&x, &min_max);
    println!("Q4_K: searched {searched:.5}, unquantized-scale min/max {baseline:.5}");
    assert!(searched < baseline, "{searched} >= {baseline}");
}

#[test]
fn quantizers_handle_zero_constant_huge_and_tiny_rows() {
    let n = 512;
    for ty in QUANTIZABLE {
        assert!(
            round_trip(ty, &vec![0.0; n]).iter().all(|v| *v == 0.0),
            "{ty:?} zeros"
        );
        for constant in [3.7f32, -2.5] {
            let decoded = round_trip(ty, &vec![constant; n]);
            let error = relative_rmse(&vec![constant; n], &decoded);
            assert!(
                error < 0.02,
                "{ty:?} constant {constant}: relative RMSE {error}"
            );
        }
        let mut rng = Rng(99);
        for magnitude in [1e30f32, 1e6, 1e-6, 1e-30, 1e-40] {
            let x: Vec<f32> = rng.normals(n).iter().map(|v| v * magnitude).collect();
            let decoded = round_trip(ty, &x);
            // Like ggml's, the quantizers store a scale past the f16 range as an infinity (and
            // F16 has no scale: out-of-range values become infinities).
            if magnitude > 1e20 || (ty == GgmlType::F16 && magnitude > 65504.0) {
                continue;
            }
            assert!(
                decoded.iter().all(|v| v.is_finite()),
                "{ty:?} magnitude {magnitude:e} gave non-finite output"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors instead of panics.

#[test]
fn wrong_lengths_are_errors() {
    for ty in SUPPORTED {
        let (elems, bytes) = (ty.block_elems(), ty.block_bytes());
        let row = vec![0u8; 2 * bytes];
        let ragged = vec![0u8; 2 * bytes + 1];
        let mut out = vec![0.0; 2 * elems + 1];
        assert!(matches!(
            dequantize_row(ty, &ragged, &mut out[..2 * elems]),
            Err(QuantError::RaggedBytes { .. })
        ));
        assert!(matches!(
            dequantize_row(ty, &row, &mut out),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert!(matches!(
            dot_row(ty, &row, &out[..elems]),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert!(matches!(
            dot_row(ty, &ragged, &out[..2 * elems]),
            Err(QuantError::RaggedBytes { .. })
        ));
        assert!(matches!(
            dequantize(ty, &row, usize::MAX),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert!(dot_row(ty, &row, &out[..2 * elems]).is_ok());
    }
    let mut sink = Vec::new();
    for ty in [GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
        let result = quantize_row(ty, &vec![1.0; ty.block_elems() + 1], &mut sink);
        assert!(
            matches!(result, Err(QuantError::RaggedElems { .. })),
            "{ty:?}"
        );
    }
    assert!(sink.is_empty());
}

#[test]
fn unsupported_types_are_named_errors() {
    let error = dequantize(GgmlType::Q4_1, &[0; 20], 32).unwrap_err();
    assert!(error.to_string().contains("q4_1"), "{error}");
    assert!(matches!(
        dot_row(GgmlType::IQ2_XXS, &[0; 66], &[0.0; 256]),
        Err(QuantError::Unsupported {
            ty: GgmlType::IQ2_XXS,
            ..
        })
    ));
    let error = quantize_row(GgmlType::Q5_0, &[0.0; 32], &mut Vec::new()).unwrap_err();
    assert!(error.to_string().contains("q5_0"), "{error}");
}

/// The exact prefill kernel must give what decode's `dot_row` gives, bit for bit, for every
/// token of a group, for a short last group, and for rows with a tail shorter than the lanes.
#[test]
fn dot_f32_tokens_is_bit_identical_to_dot_row() {
    let mut rng = Rng(0x05ee_df32);
    for cols in [1usize, 15, 256, 1000] {
        let w: Vec<f32> = (0..cols).map(|_| rng.normal()).collect();
        let xs: Vec<Vec<f32>> = (0..7)
            .map(|_| (0..cols).map(|_| rng.normal()).collect())
            .collect();
        let views: Vec<&[f32]> = xs.iter().map(Vec::as_slice).collect();
        let mut out = vec![0.0f32; xs.len()];
        qwen35::quant::dot_f32_tokens(&w, &views, &mut out).unwrap();
        let mut bytes = Vec::new();
        quantize_row(GgmlType::F32, &w, &mut bytes).unwrap();
        for (t, (x, &y)) in xs.iter().zip(&out).enumerate() {
            let single = dot_row(GgmlType::F32, &bytes, x).unwrap();
            assert_eq!(
                y.to_bits(),
                single.to_bits(),
                "cols {cols} token {t}: {y} vs {single}"
            );
        }
    }
    let mut out = [0.0f32; 1];
    assert!(qwen35::quant::dot_f32_tokens(&[1.0, 2.0], &[&[1.0][..]], &mut out).is_err());
    assert!(qwen35::quant::dot_f32_tokens(&[1.0], &[], &mut out).is_err());
}

// ---------------------------------------------------------------------------------------------
// Byte for byte against ggml's own reference quantizers.

/// `tests/data/quant/ggml_ref_in.f32` (rows of 512: normal data, all-zero, constant, outlier,
/// extreme, subnormal and tie blocks; `scripts/make_ggml_quant_vectors.py`) quantized by ggml
/// b11434's reference quantizers without an importance matrix
/// (`benches/results/convert-2026-12-04/ggml_ref/`): ours must give the same bytes.
#[test]
fn quantizers_match_ggml_reference_byte_for_byte() {
    let input = vector_f32("ggml_ref_in.f32");
    for (ty, suffix) in [
        (GgmlType::Q8_0, "q8_0"),
        (GgmlType::Q4_K, "q4_k"),
        (GgmlType::Q5_K, "q5_k"),
        (GgmlType::Q6_K, "q6_k"),
    ] {
        let expected = vector(&format!("ggml_ref_out.{suffix}"));
        let ours = quantize(ty, &input);
        assert_eq!(ours.len(), expected.len(), "{ty:?}");
        let block = ty.block_bytes();
        let differing: Vec<usize> = ours
            .chunks_exact(block)
            .zip(expected.chunks_exact(block))
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i)
            .collect();
        assert!(
            differing.is_empty(),
            "{ty:?}: blocks {differing:?} differ from ggml's"
        );
    }
}
