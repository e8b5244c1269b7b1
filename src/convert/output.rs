//! An output file that appears only when complete: data goes to a temporary file in the target's
//! directory, which is renamed over the target on success and removed on any failure (dropped
//! without [`PartialFile::finish`]).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0} already exists (pass --force to replace it)")]
    Exists(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct PartialFile {
    target: PathBuf,
    temporary: PathBuf,
    file: Option<File>,
}

impl PartialFile {
    /// Refuses an existing `target` unless `force`.
    pub fn create(target: &Path, force: bool) -> Result<PartialFile, OutputError> {
        if target.exists() && !force {
            return Err(OutputError::Exists(target.to_path_buf()));
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".into());
        let temporary = target.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let file = File::create(&temporary).map_err(|source| OutputError::Io {
            path: temporary.clone(),
            source,
        })?;
        Ok(PartialFile {
            target: target.to_path_buf(),
            temporary,
            file: Some(file),
        })
    }

    /// A buffered writer over the temporary file.
    pub fn writer(&self) -> Result<BufWriter<File>, OutputError> {
        let io = |source| OutputError::Io {
            path: self.temporary.clone(),
            source,
        };
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))?;
        // A clone of the handle shares the file offset; the original stays here to be synced.
        Ok(BufWriter::with_capacity(
            8 << 20,
            file.try_clone().map_err(io)?,
        ))
    }

    /// Flushes `writer`, syncs, and renames the file into place; returns its size in bytes.
    pub fn finish(mut self, writer: BufWriter<File>) -> Result<u64, OutputError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OutputError::Io { path, source }
        };
        writer
            .into_inner()
            .map_err(|e| e.into_error())
            .map_err(io(&self.temporary))?;
        let Some(file) = self.file.take() else {
            return Err(io(&self.temporary)(std::io::ErrorKind::NotFound.into()));
        };
        file.sync_all().map_err(io(&self.temporary))?;
        let bytes = file.metadata().map_err(io(&self.temporary))?.len();
        drop(file);
        std::fs::rename(&self.temporary, &self.target).map_err(io(&self.target))?;
        Ok(bytes)
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            // Best effort: the error being reported matters more than a failed clean-up.
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}
