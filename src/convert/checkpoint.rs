//! A Hugging Face checkpoint directory: its safetensors shards (mapped, headers validated by the
//! `safetensors` crate) and the tensors they hold, in the order llama.cpp's converter visits them:
//! shard by shard (sorted file names), each shard's tensors sorted by name.

use super::ConvertError;
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The element types a checkpoint tensor may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceDtype {
    F32,
    F16,
    BF16,
}

/// One tensor of one shard.
#[derive(Clone, Debug)]
pub struct SourceTensor {
    pub name: String,
    pub dtype: SourceDtype,
    pub shape: Vec<usize>,
    shard: usize,
    /// Byte range in the shard file.
    start: usize,
    end: usize,
}

impl SourceTensor {
    pub fn n_elements(&self) -> usize {
        self.shape.iter().product()
    }
}

struct Shard {
    path: PathBuf,
    map: Mmap,
}

pub struct Checkpoint {
    shards: Vec<Shard>,
    tensors: Vec<SourceTensor>,
}

const INDEX_FILE: &str = "model.safetensors.index.json";

impl Checkpoint {
    /// Maps every shard of `dir` and checks each header against its file.
    pub fn open(dir: &Path) -> Result<Checkpoint, ConvertError> {
        let shard_names = shard_names(dir)?;
        let mut shards = Vec::with_capacity(shard_names.len());
        let mut tensors = Vec::new();
        for (index, name) in shard_names.iter().enumerate() {
            let path = dir.join(name);
            let file = File::open(&path).map_err(|source| ConvertError::Io {
                path: path.clone(),
                source,
            })?;
            // SAFETY: the mapping is read-only and the file is not modified by this process;
            // another process truncating it is outside what any mapped reader can defend against.
            let map = unsafe { Mmap::map(&file) }.map_err(|source| ConvertError::Io {
                path: path.clone(),
                source,
            })?;
            let (header_len, metadata) =
                SafeTensors::read_metadata(&map).map_err(|source| ConvertError::Safetensors {
                    path: path.clone(),
                    problem: describe(&source),
                })?;
            let data_start = 8 + header_len;
            let mut names: Vec<(String, &safetensors::tensor::TensorInfo)> =
                metadata.tensors().into_iter().collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, info) in names {
                let dtype = match info.dtype {
                    Dtype::F32 => SourceDtype::F32,
                    Dtype::F16 => SourceDtype::F16,
                    Dtype::BF16 => SourceDtype::BF16,
                    other => {
                        return Err(ConvertError::UnsupportedDtype {
                            path: path.clone(),
                            tensor: name,
                            dtype: format!("{other:?}"),
                        })
                    }
                };
                tensors.push(SourceTensor {
                    name,
                    dtype,
                    shape: info.shape.clone(),
                    shard: index,
                    start: data_start + info.data_offsets.0,
                    end: data_start + info.data_offsets.1,
                });
            }
            shards.push(Shard { path, map });
        }
        check_index(dir, &tensors)?;
        Ok(Checkpoint { shards, tensors })
    }

    pub fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }

    /// The raw little-endian bytes of `tensor` (a view of the mapping).
    pub fn bytes(&self, tensor: &SourceTensor) -> &[u8] {
        &self.shards[tensor.shard].map[tensor.start..tensor.end]
    }

    pub fn shard_path(&self, tensor: &SourceTensor) -> &Path {
        &self.shards[tensor.shard].path
    }

    /// `tensor` widened to f32.
    pub fn to_f32(&self, tensor: &SourceTensor) -> Vec<f32> {
        let bytes = self.bytes(tensor);
        match tensor.dtype {
            SourceDtype::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            SourceDtype::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            SourceDtype::BF16 => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }
}

/// The shard files: those the index lists (sorted, de-duplicated), else every
/// `model*.safetensors` of the directory (sorted).
fn shard_names(dir: &Path) -> Result<Vec<String>, ConvertError> {
    let index_path = dir.join(INDEX_FILE);
    if index_path.is_file() {
        let names: std::collections::BTreeSet<String> =
            weight_map(&index_path)?.into_values().collect();
        for name in &names {
            if !dir.join(name).is_file() {
                return Err(ConvertError::MissingShard {
                    index: index_path.clone(),
                    shard: name.clone(),
                });
            }
        }
        return Ok(names.into_iter().collect());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| ConvertError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConvertError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("model") && name.ends_with(".safetensors") {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(ConvertError::NoShards {
            dir: dir.to_path_buf(),
        });
    }
    names.sort();
    Ok(names)
}

fn weight_map(index_path: &Path) -> Result<BTreeMap<String, String>, ConvertError> {
    let json = super::config::read_json(index_path)?;
    let bad = |problem: &str| ConvertError::BadJson {
        path: index_path.to_path_buf(),
        problem: problem.to_string(),
    };
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("no \"weight_map\" object"))?;
    map.iter()
        .map(|(tensor, shard)| {
            shard
                .as_str()
                .map(|s| (tensor.clone(), s.to_string()))
                .ok_or_else(|| bad(&format!("the shard of {tensor:?} is not a string")))
        })
        .collect()
}

/// With an index, the shards must hold exactly the tensors it lists.
fn check_index(dir: &Path, tensors: &[SourceTensor]) -> Result<(), ConvertError> {
    let index_path = dir.join(INDEX_FILE);
    if !index_path.is_file() {
        return Ok(());
    }
    let listed = weight_map(&index_path)?;
    let mut seen = std::collections::BTreeSet::new();
    for tensor in tensors {
        if !seen.insert(tensor.name.as_str()) {
            return Err(ConvertError::BadJson {
                path: index_path.clone(),
                problem: format!("tensor {:?} is in more than one shard", tensor.name),
            });
        }
    }
    if let Some(missing) = listed.keys().find(|name| !seen.contains(name.as_str())) {
        return Err(ConvertError::BadJson {
            path: index_path.clone(),
            problem: format!(
                "lists tensor {missing:?} in {:?}, which does not hold it",
                listed[missing]
            ),
        });
    }
    if let Some(extra) = seen.iter().find(|name| !listed.contains_key(**name)) {
        return Err(ConvertError::BadJson {
            path: index_path,
            problem: format!("does not list tensor {extra:?}, which a shard holds"),
        });
    }
    Ok(())
}

fn describe(error: &safetensors::SafeTensorError) -> String {
    use safetensors::SafeTensorError as E;
    match error {
        E::HeaderTooSmall => "file shorter than the 8-byte header length".into(),
        E::InvalidHeaderLength => "header length runs past the end of the file".into(),
        E::HeaderTooLarge => "header length over the 100 MB limit".into(),
        E::InvalidOffset(name) => {
            format!("tensor {name:?} has offsets that overlap, leave a gap or run backwards")
        }
        E::TensorInvalidInfo => {
            "a tensor's byte range does not match its dtype and shape (dtype contradicted by the header's offsets)".into()
        }
        E::MetadataIncompleteBuffer => {
            "the tensors' offsets do not end at the end of the file (out of range or trailing bytes)".into()
        }
        E::ValidationOverflow => "a tensor's shape overflows".into(),
        other => other.to_string(),
    }
}
