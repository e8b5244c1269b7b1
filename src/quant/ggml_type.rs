//! ggml tensor type ids and block geometry, as GGUF tensor infos name them.

/// A ggml tensor type. Every id a GGUF may carry is listed so a reader can size any tensor;
/// [`GgmlType::is_supported`] says which ones this engine can compute with.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

/// (type, id, elements per block, bytes per block), from ggml's type traits.
const TABLE: [(GgmlType, u32, usize, usize); 32] = [
    (GgmlType::F32, 0, 1, 4),
    (GgmlType::F16, 1, 1, 2),
    (GgmlType::Q4_0, 2, 32, 18),
    (GgmlType::Q4_1, 3, 32, 20),
    (GgmlType::Q5_0, 6, 32, 22),
    (GgmlType::Q5_1, 7, 32, 24),
    (GgmlType::Q8_0, 8, 32, 34),
    (GgmlType::Q8_1, 9, 32, 36),
    (GgmlType::Q2_K, 10, 256, 84),
    (GgmlType::Q3_K, 11, 256, 110),
    (GgmlType::Q4_K, 12, 256, 144),
    (GgmlType::Q5_K, 13, 256, 176),
    (GgmlType::Q6_K, 14, 256, 210),
    (GgmlType::Q8_K, 15, 256, 292),
    (GgmlType::IQ2_XXS, 16, 256, 66),
    (GgmlType::IQ2_XS, 17, 256, 74),
    (GgmlType::IQ3_XXS, 18, 256, 98),
    (GgmlType::IQ1_S, 19, 256, 50),
    (GgmlType::IQ4_NL, 20, 32, 18),
    (GgmlType::IQ3_S, 21, 256, 110),
    (GgmlType::IQ2_S, 22, 256, 82),
    (GgmlType::IQ4_XS, 23, 256, 136),
    (GgmlType::I8, 24, 1, 1),
    (GgmlType::I16, 25, 1, 2),
    (GgmlType::I32, 26, 1, 4),
    (GgmlType::I64, 27, 1, 8),
    (GgmlType::F64, 28, 1, 8),
    (GgmlType::IQ1_M, 29, 256, 56),
    (GgmlType::BF16, 30, 1, 2),
    (GgmlType::TQ1_0, 34, 256, 54),
    (GgmlType::TQ2_0, 35, 256, 66),
    (GgmlType::MXFP4, 39, 32, 17),
];

impl GgmlType {
    fn entry(self) -> &'static (GgmlType, u32, usize, usize) {
        TABLE
            .iter()
            .find(|e| e.0 == self)
            .expect("every GgmlType variant has a TABLE row")
    }

    /// The type for a ggml type id, or None for an id ggml does not define.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TABLE.iter().find(|e| e.1 == id).map(|e| e.0)
    }

    pub fn id(self) -> u32 {
        self.entry().1
    }

    /// The name ggml and llama.cpp print for this type (e.g. "q4_K").
    pub fn name(self) -> String {
        let debug = format!("{self:?}");
        match debug.strip_suffix("_K") {
            Some(stem) => format!("{}_K", stem.to_lowercase()),
            None => debug.to_lowercase(),
        }
    }

    pub fn block_elems(self) -> usize {
        self.entry().2
    }

    pub fn block_bytes(self) -> usize {
        self.entry().3
    }

    /// Whether this engine can dequantize and multiply with tensors of this type.
    pub fn is_supported(self) -> bool {
        matches!(
            self,
            GgmlType::F32
                | GgmlType::F16
                | GgmlType::BF16
                | GgmlType::Q8_0
                | GgmlType::Q4_0
                | GgmlType::Q5_0
                | GgmlType::Q4_K
                | GgmlType::Q5_K
                | GgmlType::Q6_K
        )
    }
}

/// Bytes of one row of `n_elems` elements, or None when `n_elems` is not a whole number of
/// blocks or the size overflows.
pub fn row_bytes(ty: GgmlType, n_elems: u64) -> Option<u64> {
    let block = ty.block_elems() as u64;
    if !n_elems.is_multiple_of(block) {
        return None;
    }
    (n_elems / block).checked_mul(ty.block_bytes() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_names_match_ggml() {
        for (ty, id, _, _) in TABLE {
            assert_eq!(GgmlType::from_id(id), Some(ty));
            assert_eq!(ty.id(), id);
        }
        assert_eq!(GgmlType::from_id(4), None);
        assert_eq!(GgmlType::Q4_K.name(), "q4_K");
        assert_eq!(GgmlType::BF16.name(), "bf16");
        assert_eq!(GgmlType::Q8_0.name(), "q8_0");
    }

    #[test]
    fn row_bytes_checks_block_multiples() {
        assert_eq!(row_bytes(GgmlType::Q4_K, 5120), Some(20 * 144));
        assert_eq!(row_bytes(GgmlType::Q4_K, 100), None);
        assert_eq!(row_bytes(GgmlType::F32, 7), Some(28));
        assert_eq!(row_bytes(GgmlType::F64, u64::MAX), None);
    }
}
