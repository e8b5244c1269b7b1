//! Tensor infos and the shape arithmetic that sizes their data.

use super::error::GgufError;
use super::format::MAX_DIMS;
use crate::quant::{row_bytes, GgmlType};

/// One tensor as the file describes it, with its size already computed and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml `ne` order: `dims[0]` is the innermost, contiguous dimension.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Absolute file offset of the tensor's first data byte.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Elements per row: `ne[0]`.
    pub fn cols(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Number of rows: the product of every dimension after `ne[0]` (1 for a vector).
    pub fn rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> u64 {
        self.n_bytes / self.rows()
    }
}

/// The element count and data size of a tensor of shape `dims` and type `ggml_type`, refusing
/// shapes ggml cannot hold: too many or zero dimensions, rows that are not whole quant blocks,
/// sizes that overflow. `offset` locates the tensor info in a file being read.
pub(super) fn tensor_size(
    name: &str,
    dims: &[u64],
    ggml_type: GgmlType,
    offset: Option<u64>,
) -> Result<(u64, u64), GgufError> {
    if dims.len() > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            tensor: name.to_string(),
            offset,
            n_dims: dims.len() as u64,
        });
    }
    let Some(&ne0) = dims.first().filter(|_| !dims.contains(&0)) else {
        return Err(GgufError::ZeroDim {
            tensor: name.to_string(),
            offset,
            dims: dims.to_vec(),
        });
    };
    let overflow = || GgufError::SizeOverflow {
        tensor: name.to_string(),
        offset,
        dims: dims.to_vec(),
        ggml_type,
    };
    // ggml counts elements in i64.
    let n_elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| i64::try_from(n).is_ok())
        .ok_or_else(overflow)?;
    if !ne0.is_multiple_of(ggml_type.block_elems() as u64) {
        return Err(GgufError::NotWholeBlocks {
            tensor: name.to_string(),
            offset,
            ne0,
            ggml_type,
        });
    }
    let rows = n_elements / ne0;
    let n_bytes = row_bytes(ggml_type, ne0)
        .and_then(|row| row.checked_mul(rows))
        .ok_or_else(overflow)?;
    Ok((n_elements, n_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_quantized_and_plain_tensors() {
        assert_eq!(
            tensor_size("w", &[512, 3], GgmlType::Q4_K, None).unwrap(),
            (1536, 2 * 144 * 3)
        );
        assert_eq!(
            tensor_size("b", &[5], GgmlType::F32, None).unwrap(),
            (5, 20)
        );
    }

    #[test]
    fn refuses_shapes_ggml_cannot_hold() {
        let err = |dims: &[u64], ty| tensor_size("t", dims, ty, Some(7)).unwrap_err();
        assert!(matches!(err(&[], GgmlType::F32), GgufError::ZeroDim { .. }));
        assert!(matches!(
            err(&[4, 0], GgmlType::F32),
            GgufError::ZeroDim { .. }
        ));
        assert!(matches!(
            err(&[1, 1, 1, 1, 1], GgmlType::F32),
            GgufError::TooManyDims { n_dims: 5, .. }
        ));
        assert!(matches!(
            err(&[1 << 32, 1 << 32], GgmlType::F32),
            GgufError::SizeOverflow { .. }
        ));
        assert!(matches!(
            err(&[1 << 62], GgmlType::F32),
            GgufError::SizeOverflow { .. }
        ));
        assert!(matches!(
            err(&[100, 2], GgmlType::Q4_K),
            GgufError::NotWholeBlocks { ne0: 100, .. }
        ));
    }

    #[test]
    fn rows_and_cols_follow_ne_order() {
        let info = TensorInfo {
            name: "w".into(),
            dims: vec![64, 3, 2],
            ggml_type: GgmlType::Q8_0,
            offset: 0,
            n_elements: 384,
            n_bytes: 2 * 34 * 6,
        };
        assert_eq!((info.cols(), info.rows(), info.row_bytes()), (64, 6, 68));
    }
}
