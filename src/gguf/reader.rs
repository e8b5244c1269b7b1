//! [`GgufFile`]: a parsed GGUF file whose tensor data stays in the (mapped) file.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use super::error::GgufError;
use super::parse::{parse, Layout};
use super::tensor::TensorInfo;
use super::value::MetaValue;

/// A GGUF file: its metadata and tensor infos, parsed and validated, and its bytes, from which
/// tensor data is borrowed without copying.
pub struct GgufFile {
    bytes: Storage,
    layout: Layout,
}

enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(map) => map,
            Storage::Owned(bytes) => bytes,
        }
    }
}

impl GgufFile {
    /// Maps the file at `path` and parses it. Only the pages holding the header, metadata and
    /// tensor infos are read; tensor data is not touched until asked for.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io_error = |source| GgufError::Io {
            context: format!("opening {}", path.display()),
            source,
        };
        let file = File::open(path).map_err(io_error)?;
        // Mapping a directory fails with ENODEV ("No such device"), which does not say what is
        // wrong.
        if file.metadata().map_err(io_error)?.is_dir() {
            return Err(io_error(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "it is a directory, not a GGUF file",
            )));
        }
        // SAFETY: the mapping is read-only and private to this value. Like every reader of a
        // mapped model, this assumes no other process truncates or rewrites the file while it
        // is open; that would be a bug outside this program.
        let map = unsafe { Mmap::map(&file) }.map_err(io_error)?;
        GgufFile::from_storage(Storage::Mapped(map))
    }

    /// Parses a GGUF file held in memory (tests, fuzzing, generated fixtures).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        GgufFile::from_storage(Storage::Owned(bytes))
    }

    fn from_storage(bytes: Storage) -> Result<GgufFile, GgufError> {
        let layout = parse(bytes.bytes())?;
        Ok(GgufFile { bytes, layout })
    }

    pub fn version(&self) -> u32 {
        self.layout.version
    }

    /// Metadata entries in file order.
    pub fn metadata(&self) -> impl ExactSizeIterator<Item = (&str, &MetaValue)> {
        self.layout
            .metadata
            .iter()
            .map(|(key, value)| (key.as_str(), value))
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        let &index = self.layout.key_index.get(key)?;
        self.layout.metadata.get(index).map(|(_, value)| value)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.layout.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.layout
            .tensors
            .get(*self.layout.tensor_index.get(name)?)
    }

    /// The data bytes of `info`, which must be one of this file's [`GgufFile::tensors`].
    ///
    /// # Panics
    /// If `info` describes bytes outside this file (an info taken from another file); every info
    /// this file hands out was checked to lie inside it.
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let range = usize::try_from(info.offset)
            .ok()
            .zip(usize::try_from(info.offset.saturating_add(info.n_bytes)).ok())
            .and_then(|(start, end)| self.bytes.bytes().get(start..end));
        range.unwrap_or_else(|| {
            panic!(
                "tensor {:?} lies outside this {}-byte GGUF file",
                info.name,
                self.file_size()
            )
        })
    }

    /// Absolute file offset of the data section.
    /// The header, metadata and tensor table: every byte before the tensor data.
    pub fn header_bytes(&self) -> &[u8] {
        let bytes = self.bytes.bytes();
        &bytes[..usize::try_from(self.layout.data_offset)
            .map_or(bytes.len(), |end| end.min(bytes.len()))]
    }

    pub fn data_offset(&self) -> u64 {
        self.layout.data_offset
    }

    pub fn alignment(&self) -> u64 {
        self.layout.alignment
    }

    pub fn file_size(&self) -> u64 {
        self.bytes.bytes().len() as u64
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.layout.version)
            .field("file_size", &self.file_size())
            .field("metadata_entries", &self.layout.metadata.len())
            .field("tensors", &self.layout.tensors.len())
            .finish()
    }
}
