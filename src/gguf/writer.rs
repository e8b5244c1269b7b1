//! [`GgufWriter`]: declares a file's metadata and tensor layout, writes the header, then streams
//! tensor data in declared order so that a model of any size never has to be held in memory.

use std::collections::HashSet;
use std::io::Write;

use super::error::GgufError;
use super::format::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, DEFAULT_VERSION, MAGIC, SUPPORTED_VERSIONS};
use super::tensor::tensor_size;
use super::value::{MetaArray, MetaValue};
use crate::quant::GgmlType;

/// The layout of a GGUF file being built. [`GgufWriter::write_header`] turns it into a
/// [`TensorDataWriter`] that takes the tensor data.
#[derive(Debug)]
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, MetaValue)>,
    keys: HashSet<String>,
    tensors: Vec<PlannedTensor>,
    names: HashSet<String>,
    data_size: u64,
}

#[derive(Debug)]
struct PlannedTensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    relative_offset: u64,
    n_bytes: u64,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter {
            version: DEFAULT_VERSION,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
            data_size: 0,
        }
    }
}

impl GgufWriter {
    /// A writer for a version 3 file.
    pub fn new() -> Self {
        GgufWriter::default()
    }

    /// A writer for a file of `version` (2 or 3; both share the little-endian layout).
    pub fn with_version(version: u32) -> Result<Self, GgufError> {
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(GgufError::UnsupportedVersion { version });
        }
        Ok(GgufWriter {
            version,
            ..GgufWriter::default()
        })
    }

    /// Adds a metadata entry. [`ALIGNMENT_KEY`] also sets the data alignment, so it must come
    /// before any tensor.
    pub fn add_kv(&mut self, key: &str, value: MetaValue) -> Result<(), GgufError> {
        if self.keys.contains(key) {
            return Err(GgufError::DuplicateKey {
                key: key.to_string(),
                offset: None,
            });
        }
        if key == ALIGNMENT_KEY {
            if !self.tensors.is_empty() {
                return Err(GgufError::BadAlignment {
                    found: format!("{value:?} set after tensors were laid out"),
                });
            }
            self.alignment = value.as_alignment()?;
        }
        self.keys.insert(key.to_string());
        self.metadata.push((key.to_string(), value));
        Ok(())
    }

    /// Declares the next tensor; its data must later be written in declaration order.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ggml_type: GgmlType,
    ) -> Result<(), GgufError> {
        if self.names.contains(name) {
            return Err(GgufError::DuplicateTensor {
                tensor: name.to_string(),
                offset: None,
            });
        }
        let (_, n_bytes) = tensor_size(name, dims, ggml_type, None)?;
        let overflow = || GgufError::SizeOverflow {
            tensor: name.to_string(),
            offset: None,
            dims: dims.to_vec(),
            ggml_type,
        };
        let relative_offset = self.data_size;
        self.data_size = relative_offset
            .checked_add(n_bytes)
            .and_then(|end| end.checked_next_multiple_of(self.alignment))
            .ok_or_else(overflow)?;
        self.names.insert(name.to_string());
        self.tensors.push(PlannedTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ggml_type,
            relative_offset,
            n_bytes,
        });
        Ok(())
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Writes the header, metadata, tensor infos and the padding up to the data section.
    pub fn write_header<W: Write>(self, mut out: W) -> Result<TensorDataWriter<W>, GgufError> {
        let mut header = Vec::new();
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&self.version.to_le_bytes());
        header.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        header.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            encode_str(&mut header, key);
            header.extend_from_slice(&value.value_type().id().to_le_bytes());
            encode_value(&mut header, value);
        }
        for tensor in &self.tensors {
            encode_str(&mut header, &tensor.name);
            header.extend_from_slice(&(tensor.dims.len() as u32).to_le_bytes());
            for dim in &tensor.dims {
                header.extend_from_slice(&dim.to_le_bytes());
            }
            header.extend_from_slice(&tensor.ggml_type.id().to_le_bytes());
            header.extend_from_slice(&tensor.relative_offset.to_le_bytes());
        }
        let data_offset = (header.len() as u64).next_multiple_of(self.alignment);
        header.resize(data_offset as usize, 0);
        out.write_all(&header).map_err(|source| GgufError::Io {
            context: "writing the GGUF header".into(),
            source,
        })?;
        Ok(TensorDataWriter {
            out,
            alignment: self.alignment,
            tensors: self.tensors,
            current: 0,
            written: 0,
        })
    }
}

/// Takes the tensor data of a file whose header has been written, in declared order, padding
/// each tensor to the alignment.
#[derive(Debug)]
pub struct TensorDataWriter<W: Write> {
    out: W,
    alignment: u64,
    tensors: Vec<PlannedTensor>,
    /// Index of the tensor whose data comes next.
    current: usize,
    /// Bytes of the current tensor written so far.
    written: u64,
}

impl<W: Write> TensorDataWriter<W> {
    /// Name of the tensor whose data comes next, or None when all are complete.
    pub fn next_tensor(&self) -> Option<&str> {
        self.tensors.get(self.current).map(|t| t.name.as_str())
    }

    /// Writes all of tensor `name`'s data, which must be the next tensor with nothing written yet.
    pub fn write_tensor(&mut self, name: &str, bytes: &[u8]) -> Result<(), GgufError> {
        let expected = match self.tensors.get(self.current) {
            Some(tensor) if self.written == 0 && tensor.name == name => tensor,
            other => {
                return Err(GgufError::TensorOutOfOrder {
                    expected: match other {
                        Some(tensor) if self.written == 0 => format!("{:?}", tensor.name),
                        Some(tensor) => format!("the rest of {:?}", tensor.name),
                        None => "no more tensors".into(),
                    },
                    got: name.to_string(),
                })
            }
        };
        if bytes.len() as u64 != expected.n_bytes {
            return Err(GgufError::DataSizeMismatch {
                tensor: name.to_string(),
                declared: expected.n_bytes,
                written: bytes.len() as u64,
            });
        }
        self.write_data(bytes)
    }

    /// Appends `bytes` to the current tensor's data; a chunk may not run past the end of the
    /// tensor. The alignment padding follows the last byte of each tensor.
    pub fn write_data(&mut self, bytes: &[u8]) -> Result<(), GgufError> {
        let Some(tensor) = self.tensors.get(self.current) else {
            return Err(GgufError::ExtraData {
                bytes: bytes.len() as u64,
            });
        };
        let written = self.written + bytes.len() as u64;
        if written > tensor.n_bytes {
            return Err(GgufError::DataSizeMismatch {
                tensor: tensor.name.clone(),
                declared: tensor.n_bytes,
                written,
            });
        }
        let io_error = |source| GgufError::Io {
            context: format!("writing data of tensor {:?}", tensor.name),
            source,
        };
        self.out.write_all(bytes).map_err(io_error)?;
        if written == tensor.n_bytes {
            let padding = written.next_multiple_of(self.alignment) - written;
            self.out
                .write_all(&vec![0; padding as usize])
                .map_err(io_error)?;
            self.current += 1;
            self.written = 0;
        } else {
            self.written = written;
        }
        Ok(())
    }

    /// Checks that every declared tensor is complete, flushes, and returns the output.
    pub fn finish(mut self) -> Result<W, GgufError> {
        if let Some(tensor) = self.tensors.get(self.current) {
            return Err(GgufError::DataSizeMismatch {
                tensor: tensor.name.clone(),
                declared: tensor.n_bytes,
                written: self.written,
            });
        }
        self.out.flush().map_err(|source| GgufError::Io {
            context: "flushing the GGUF output".into(),
            source,
        })?;
        Ok(self.out)
    }
}

fn encode_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn encode_value(out: &mut Vec<u8>, value: &MetaValue) {
    match value {
        MetaValue::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::Bool(v) => out.push(u8::from(*v)),
        MetaValue::Str(v) => encode_str(out, v),
        MetaValue::Array(v) => encode_array(out, v),
        MetaValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

fn encode_array(out: &mut Vec<u8>, array: &MetaArray) {
    out.extend_from_slice(&array.element_type().id().to_le_bytes());
    out.extend_from_slice(&(array.len() as u64).to_le_bytes());
    match array {
        MetaArray::U8(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I8(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::U16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::U32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::F32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::Bool(v) => v.iter().for_each(|&x| out.push(u8::from(x))),
        MetaArray::Str(v) => v.iter().for_each(|x| encode_str(out, x)),
        MetaArray::Array(v) => v.iter().for_each(|x| encode_array(out, x)),
        MetaArray::U64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::I64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        MetaArray::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
}
