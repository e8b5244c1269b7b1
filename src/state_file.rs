//! `--prompt-cache FILE`: a model state and the tokens that produced it, on disk, tied to the
//! model it was computed with. A file for another model, or one cut short or altered, is refused
//! with an error naming the problem.
//!
//! Layout, little-endian: `QWEN35ST`, version (u32), the model identity (32 bytes: SHA-256 of the
//! GGUF header and tensor table), token count (u64) and tokens (u32 each), position (u64), layer
//! count (u64), per layer two tensors as value count (u64) and f32 values, then the SHA-256 of
//! everything before it.

use crate::gguf::GgufFile;
use crate::model::Snapshot;
use crate::prefix_cache::PrefixCache;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"QWEN35ST";
const VERSION: u32 = 1;
const HASH_BYTES: usize = 32;

/// What identifies a model file: the SHA-256 of its header, metadata and tensor table (the
/// weights' names, shapes, types and offsets; the weights themselves are not read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelIdentity([u8; HASH_BYTES]);

impl ModelIdentity {
    pub fn of(file: &GgufFile) -> ModelIdentity {
        ModelIdentity(Sha256::digest(file.header_bytes()).into())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a qwen35 prompt-cache file")]
    NotAStateFile { path: PathBuf },
    #[error(
        "{path} is a prompt-cache file of version {found}; this build reads version {VERSION}"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("{path} is truncated: {what} ends past the end of the file")]
    Truncated { path: PathBuf, what: &'static str },
    #[error("{path} is corrupted: its checksum does not match its contents")]
    Corrupted { path: PathBuf },
    #[error("{path} was saved for another model (its model hash differs from this file's)")]
    OtherModel { path: PathBuf },
    #[error("{path} is inconsistent: {reason}")]
    Inconsistent { path: PathBuf, reason: String },
}

/// Writes the state after `tokens` (through a temporary file, so a crash never leaves half a
/// file under `path`).
pub fn save(
    path: &Path,
    identity: ModelIdentity,
    tokens: &[u32],
    snapshot: &Snapshot,
) -> Result<(), StateFileError> {
    let mut bytes = Vec::with_capacity(snapshot.bytes() + 4 * tokens.len() + 128);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&identity.0);
    bytes.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
    for token in tokens {
        bytes.extend_from_slice(&token.to_le_bytes());
    }
    bytes.extend_from_slice(&(snapshot.position() as u64).to_le_bytes());
    bytes.extend_from_slice(&(snapshot.tensors().len() as u64).to_le_bytes());
    for tensor in snapshot.tensors().iter().flatten() {
        bytes.extend_from_slice(&(tensor.len() as u64).to_le_bytes());
        bytes.extend_from_slice(bytemuck::cast_slice(tensor));
    }
    let checksum = Sha256::digest(&bytes);
    bytes.extend_from_slice(&checksum);
    let io = |source| StateFileError::Io {
        path: path.to_owned(),
        source,
    };
    let partial = path.with_extension("partial");
    std::fs::write(&partial, &bytes).map_err(io)?;
    std::fs::rename(&partial, path).map_err(io)
}

/// Reads a state saved for the model `identity`: its tokens and snapshot.
pub fn load(path: &Path, identity: ModelIdentity) -> Result<(Vec<u32>, Snapshot), StateFileError> {
    let bytes = std::fs::read(path).map_err(|source| StateFileError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut reader = Reader {
        bytes: &bytes,
        at: 0,
        path,
    };
    if reader.take(MAGIC.len(), "the header").ok() != Some(&MAGIC[..]) {
        return Err(StateFileError::NotAStateFile {
            path: path.to_owned(),
        });
    }
    let version = reader.u32("the version")?;
    if version != VERSION {
        return Err(StateFileError::Version {
            path: path.to_owned(),
            found: version,
        });
    }
    let saved_for = reader.take(HASH_BYTES, "the model hash")?.to_vec();
    let n_tokens = reader.count(4, "the tokens")?;
    let tokens = (0..n_tokens)
        .map(|_| reader.u32("the tokens"))
        .collect::<Result<Vec<_>, _>>()?;
    let position = reader.u64("the position")?;
    let n_layers = reader.count(16, "the layers")?;
    let mut tensors = Vec::with_capacity(n_layers);
    for _ in 0..n_layers {
        let mut pair = [Vec::new(), Vec::new()];
        for tensor in &mut pair {
            let n = reader.count(4, "a state tensor")?;
            *tensor = bytemuck::pod_collect_to_vec(reader.take(4 * n, "a state tensor")?);
        }
        tensors.push(pair);
    }
    let contents = reader.at;
    let checksum = reader.take(HASH_BYTES, "the checksum")?;
    if reader.at != bytes.len() || checksum != Sha256::digest(&bytes[..contents]).as_slice() {
        return Err(StateFileError::Corrupted {
            path: path.to_owned(),
        });
    }
    if saved_for != identity.0 {
        return Err(StateFileError::OtherModel {
            path: path.to_owned(),
        });
    }
    if position != tokens.len() as u64 {
        return Err(StateFileError::Inconsistent {
            path: path.to_owned(),
            reason: format!("position {position} for {} tokens", tokens.len()),
        });
    }
    let snapshot = Snapshot::from_parts(tokens.len(), tensors);
    Ok((tokens, snapshot))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], StateFileError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| StateFileError::Truncated {
                path: self.path.to_owned(),
                what,
            })?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, StateFileError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes(bytes.try_into().unwrap_or_default()))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, StateFileError> {
        let bytes = self.take(8, what)?;
        Ok(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
    }

    /// A count of items of at least `item_bytes` each, which must fit in what is left (so a
    /// corrupted count cannot ask for a huge allocation).
    fn count(&mut self, item_bytes: usize, what: &'static str) -> Result<usize, StateFileError> {
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.at) as u64;
        if n.saturating_mul(item_bytes as u64) > left {
            return Err(StateFileError::Truncated {
                path: self.path.to_owned(),
                what,
            });
        }
        Ok(n as usize)
    }
}

/// `--prompt-cache FILE` of one model: read into a [`PrefixCache`] at the start, written from
/// it at the end.
#[derive(Debug, Clone)]
pub struct PromptCacheFile {
    pub path: PathBuf,
    pub identity: ModelIdentity,
}

impl PromptCacheFile {
    /// Puts the saved state into `cache`; returns its token count, or `None` when the file does
    /// not exist yet.
    pub fn load_into(&self, cache: &mut PrefixCache) -> Result<Option<usize>, StateFileError> {
        if !self.path.exists() {
            return Ok(None);
        }
        let (tokens, snapshot) = load(&self.path, self.identity)?;
        let count = tokens.len();
        cache.insert(tokens, snapshot);
        Ok(Some(count))
    }

    /// Saves the state the cache kept or used last; returns its token count (`None`: nothing
    /// to save).
    pub fn save_from(&self, cache: &PrefixCache) -> Result<Option<usize>, StateFileError> {
        let Some((tokens, snapshot)) = cache.most_recent() else {
            return Ok(None);
        };
        save(&self.path, self.identity, tokens, snapshot)?;
        Ok(Some(tokens.len()))
    }
}
