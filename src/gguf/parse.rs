//! Parsing of the GGUF header, metadata and tensor infos, validating as it goes.
//!
//! Only the bytes before the data section are read. Every count and length is checked against
//! the bytes that remain before anything is allocated for it, so a crafted file cannot make the
//! parser reserve more memory than a small multiple of its own size.

use std::collections::HashMap;

use super::cursor::Cursor;
use super::error::GgufError;
use super::format::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS, SUPPORTED_VERSIONS,
};
use super::tensor::{tensor_size, TensorInfo};
use super::value::{MetaArray, MetaValue, ValueType};
use crate::quant::GgmlType;

/// Fewest bytes one metadata entry occupies: key length, value type, a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Fewest bytes one tensor info occupies: name length, n_dims, ggml type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

/// Everything a GGUF file says about itself, apart from the tensor data.
pub(super) struct Layout {
    pub version: u32,
    pub alignment: u64,
    pub data_offset: u64,
    pub metadata: Vec<(String, MetaValue)>,
    pub key_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
}

/// Parses and validates the file whose complete contents are `bytes`.
pub(super) fn parse(bytes: &[u8]) -> Result<Layout, GgufError> {
    let file_size = bytes.len() as u64;
    let mut parser = Parser {
        cursor: Cursor::new(bytes),
    };

    let magic = parser.fixed::<4>(|| "magic".into())?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = u32::from_le_bytes(parser.fixed(|| "version".into())?);
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    let tensor_count_what = || "tensor_count".to_string();
    let tensor_count_offset = parser.cursor.offset();
    let tensor_count = parser.count(tensor_count_what, "tensor infos", MIN_TENSOR_INFO_BYTES)?;
    let kv_count = parser.count(|| "kv_count".into(), "metadata entries", MIN_KV_BYTES)?;

    let (metadata, key_index) = parser.metadata(kv_count)?;
    let alignment = match key_index.get(ALIGNMENT_KEY).and_then(|&i| metadata.get(i)) {
        Some((_, value)) => value.as_alignment()?,
        None => DEFAULT_ALIGNMENT,
    };

    // The tensor count was checked against the bytes after the header; the metadata may have
    // used most of them since, so check again before reserving.
    parser.check_count(
        tensor_count_what,
        tensor_count_offset,
        tensor_count as u64,
        "tensor infos",
        MIN_TENSOR_INFO_BYTES,
    )?;
    let (mut tensors, tensor_index) = parser.tensor_infos(tensor_count)?;

    // The cursor is within a slice, and the alignment is at most 2^31, so this cannot overflow.
    let data_offset = parser.cursor.offset().next_multiple_of(alignment);
    for tensor in &mut tensors {
        place_tensor(tensor, data_offset, alignment, file_size)?;
    }
    check_no_overlap(&tensors)?;

    Ok(Layout {
        version,
        alignment,
        data_offset,
        metadata,
        key_index,
        tensors,
        tensor_index,
    })
}

/// Turns a tensor's `offset` (on entry: relative to the data section) into an absolute file
/// offset after checking that its data is aligned and inside the file.
fn place_tensor(
    tensor: &mut TensorInfo,
    data_offset: u64,
    alignment: u64,
    file_size: u64,
) -> Result<(), GgufError> {
    let relative = tensor.offset;
    if !relative.is_multiple_of(alignment) {
        return Err(GgufError::MisalignedOffset {
            tensor: tensor.name.clone(),
            offset: relative,
            alignment,
        });
    }
    let start = u128::from(data_offset) + u128::from(relative);
    if start + u128::from(tensor.n_bytes) > u128::from(file_size) {
        return Err(GgufError::DataOutOfBounds {
            tensor: tensor.name.clone(),
            start,
            relative,
            n_bytes: tensor.n_bytes,
            file_size,
        });
    }
    // Inside the file, so it fits in u64.
    tensor.offset = data_offset + relative;
    Ok(())
}

fn check_no_overlap(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
    by_offset.sort_by_key(|t| t.offset);
    for pair in by_offset.windows(2) {
        let [first, second] = pair else { continue };
        let first_end = first.offset + first.n_bytes;
        if first_end > second.offset {
            return Err(GgufError::OverlappingTensors {
                first: first.name.clone(),
                first_start: first.offset,
                first_end,
                second: second.name.clone(),
                second_start: second.offset,
            });
        }
    }
    Ok(())
}

struct Parser<'a> {
    cursor: Cursor<'a>,
}

/// Entries in file order, and the index of each key in them.
type Entries<T> = (Vec<T>, HashMap<String, usize>);

impl Parser<'_> {
    fn metadata(&mut self, kv_count: usize) -> Result<Entries<(String, MetaValue)>, GgufError> {
        let mut metadata = Vec::with_capacity(kv_count);
        let mut key_index = HashMap::with_capacity(kv_count);
        for index in 0..kv_count {
            let entry_offset = self.cursor.offset();
            let key = self.string(|| format!("key of metadata entry {index}"))?;
            if key_index.contains_key(&key) {
                return Err(GgufError::DuplicateKey {
                    key,
                    offset: Some(entry_offset),
                });
            }
            let value_type = self.value_type(&key)?;
            let value = self.value(&key, value_type, 0)?;
            key_index.insert(key.clone(), metadata.len());
            metadata.push((key, value));
        }
        Ok((metadata, key_index))
    }

    fn tensor_infos(&mut self, tensor_count: usize) -> Result<Entries<TensorInfo>, GgufError> {
        let mut tensors = Vec::with_capacity(tensor_count);
        let mut tensor_index = HashMap::with_capacity(tensor_count);
        for index in 0..tensor_count {
            let info_offset = self.cursor.offset();
            let info = self.tensor_info(index)?;
            if tensor_index.contains_key(&info.name) {
                return Err(GgufError::DuplicateTensor {
                    tensor: info.name,
                    offset: Some(info_offset),
                });
            }
            tensor_index.insert(info.name.clone(), tensors.len());
            tensors.push(info);
        }
        Ok((tensors, tensor_index))
    }

    fn fixed<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N], GgufError> {
        self.cursor.array().map_err(|short| short.reading(what()))
    }

    fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        self.cursor.u32().map_err(|short| short.reading(what()))
    }

    fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        self.cursor.u64().map_err(|short| short.reading(what()))
    }

    /// Reads a u64 count of items that take at least `min_each` bytes apiece, refusing counts the
    /// rest of the file cannot hold.
    fn count(
        &mut self,
        what: impl Fn() -> String,
        unit: &'static str,
        min_each: u64,
    ) -> Result<usize, GgufError> {
        let offset = self.cursor.offset();
        let count = self.u64(&what)?;
        self.check_count(what, offset, count, unit, min_each)
    }

    /// Checks that `count` items of at least `min_each` bytes fit in the bytes left.
    fn check_count(
        &self,
        what: impl Fn() -> String,
        offset: u64,
        count: u64,
        unit: &'static str,
        min_each: u64,
    ) -> Result<usize, GgufError> {
        let needed = u128::from(count) * u128::from(min_each);
        let available = self.cursor.remaining();
        if needed > u128::from(available) {
            return Err(GgufError::CountTooLarge {
                what: what(),
                offset,
                count,
                unit,
                needed,
                available,
            });
        }
        // At most the remaining bytes of an in-memory slice, so it fits in usize.
        Ok(count as usize)
    }

    fn string(&mut self, what: impl Fn() -> String) -> Result<String, GgufError> {
        let len = self.count(|| format!("length of {}", what()), "bytes", 1)?;
        let offset = self.cursor.offset();
        let bytes = self
            .cursor
            .take(len as u64)
            .map_err(|short| short.reading(what()))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 {
            what: what(),
            offset,
        })
    }

    fn value_type(&mut self, key: &str) -> Result<ValueType, GgufError> {
        let offset = self.cursor.offset();
        let type_id = self.u32(|| format!("value type of key {key:?}"))?;
        ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.to_string(),
            offset,
            type_id,
        })
    }

    /// Reads one value of type `ty` for `key`; `depth` counts the arrays it is nested in.
    fn value(&mut self, key: &str, ty: ValueType, depth: usize) -> Result<MetaValue, GgufError> {
        let what = || format!("{} value of key {key:?}", ty.name());
        Ok(match ty {
            ValueType::U8 => MetaValue::U8(u8::from_le_bytes(self.fixed(what)?)),
            ValueType::I8 => MetaValue::I8(i8::from_le_bytes(self.fixed(what)?)),
            ValueType::U16 => MetaValue::U16(u16::from_le_bytes(self.fixed(what)?)),
            ValueType::I16 => MetaValue::I16(i16::from_le_bytes(self.fixed(what)?)),
            ValueType::U32 => MetaValue::U32(u32::from_le_bytes(self.fixed(what)?)),
            ValueType::I32 => MetaValue::I32(i32::from_le_bytes(self.fixed(what)?)),
            ValueType::F32 => MetaValue::F32(f32::from_le_bytes(self.fixed(what)?)),
            ValueType::U64 => MetaValue::U64(u64::from_le_bytes(self.fixed(what)?)),
            ValueType::I64 => MetaValue::I64(i64::from_le_bytes(self.fixed(what)?)),
            ValueType::F64 => MetaValue::F64(f64::from_le_bytes(self.fixed(what)?)),
            ValueType::Bool => {
                let offset = self.cursor.offset();
                let byte = u8::from_le_bytes(self.fixed(what)?);
                MetaValue::Bool(bool_from_byte(key, offset, byte)?)
            }
            ValueType::Str => MetaValue::Str(self.string(what)?),
            ValueType::Array => MetaValue::Array(self.array(key, depth + 1)?),
        })
    }

    /// Reads an array header and its elements; `depth` is 1 for an array that is a key's value.
    fn array(&mut self, key: &str, depth: usize) -> Result<MetaArray, GgufError> {
        let offset = self.cursor.offset();
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep {
                key: key.to_string(),
                offset,
                max: MAX_ARRAY_DEPTH,
            });
        }
        let element_type = self.value_type(key)?;
        let count = self.count(
            || format!("length of {} array of key {key:?}", element_type.name()),
            "elements",
            element_type.min_encoded_size(),
        )?;
        let element = |i: usize| move || format!("element {i} of key {key:?}");
        Ok(match element_type {
            ValueType::U8 => MetaArray::U8(self.numbers(count, u8::from_le_bytes)),
            ValueType::I8 => MetaArray::I8(self.numbers(count, i8::from_le_bytes)),
            ValueType::U16 => MetaArray::U16(self.numbers(count, u16::from_le_bytes)),
            ValueType::I16 => MetaArray::I16(self.numbers(count, i16::from_le_bytes)),
            ValueType::U32 => MetaArray::U32(self.numbers(count, u32::from_le_bytes)),
            ValueType::I32 => MetaArray::I32(self.numbers(count, i32::from_le_bytes)),
            ValueType::F32 => MetaArray::F32(self.numbers(count, f32::from_le_bytes)),
            ValueType::U64 => MetaArray::U64(self.numbers(count, u64::from_le_bytes)),
            ValueType::I64 => MetaArray::I64(self.numbers(count, i64::from_le_bytes)),
            ValueType::F64 => MetaArray::F64(self.numbers(count, f64::from_le_bytes)),
            ValueType::Bool => {
                let start = self.cursor.offset();
                let bytes: Vec<u8> = self.numbers(count, u8::from_le_bytes);
                let bools = bytes
                    .iter()
                    .zip(start..)
                    .map(|(&byte, offset)| bool_from_byte(key, offset, byte));
                MetaArray::Bool(bools.collect::<Result<_, _>>()?)
            }
            ValueType::Str => MetaArray::Str(
                (0..count)
                    .map(|i| self.string(element(i)))
                    .collect::<Result<_, _>>()?,
            ),
            ValueType::Array => MetaArray::Array(
                (0..count)
                    .map(|_| self.array(key, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Reads `count` fixed-size numbers. `count` came from [`Parser::count`] with `N` bytes per
    /// element, so the bytes are known to be there.
    fn numbers<const N: usize, T>(&mut self, count: usize, decode: fn([u8; N]) -> T) -> Vec<T> {
        let bytes = self.cursor.take((count * N) as u64).unwrap_or_default();
        bytes
            .chunks_exact(N)
            .map(|chunk| {
                let mut raw = [0u8; N];
                raw.copy_from_slice(chunk);
                decode(raw)
            })
            .collect()
    }

    /// Reads tensor info number `index`, returning it with its data offset still relative to
    /// the data section.
    fn tensor_info(&mut self, index: usize) -> Result<TensorInfo, GgufError> {
        let info_offset = self.cursor.offset();
        let name = self.string(|| format!("name of tensor info {index}"))?;
        let n_dims = self.u32(|| format!("n_dims of tensor {name:?}"))?;
        if n_dims as usize > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                tensor: name,
                offset: Some(info_offset),
                n_dims: n_dims.into(),
            });
        }
        let dims = (0..n_dims)
            .map(|axis| self.u64(|| format!("ne[{axis}] of tensor {name:?}")))
            .collect::<Result<Vec<u64>, _>>()?;
        let type_id = self.u32(|| format!("ggml type of tensor {name:?}"))?;
        let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownGgmlType {
            tensor: name.clone(),
            offset: info_offset,
            type_id,
        })?;
        let relative_offset = self.u64(|| format!("data offset of tensor {name:?}"))?;
        let (n_elements, n_bytes) = tensor_size(&name, &dims, ggml_type, Some(info_offset))?;
        Ok(TensorInfo {
            name,
            dims,
            ggml_type,
            offset: relative_offset,
            n_elements,
            n_bytes,
        })
    }
}

fn bool_from_byte(key: &str, offset: u64, byte: u8) -> Result<bool, GgufError> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(GgufError::InvalidBool {
            key: key.to_string(),
            offset,
            byte,
        }),
    }
}
