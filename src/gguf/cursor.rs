//! A bounds-checked little-endian reader over the bytes of a GGUF file.

use super::error::GgufError;

/// A read position in a byte slice. Reads past the end fail with [`Short`] instead of panicking.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// A read that ran past the end of the bytes; [`Short::reading`] adds what was being read.
#[derive(Debug)]
pub(super) struct Short {
    offset: u64,
    needed: u64,
    available: u64,
}

impl Short {
    pub(super) fn reading(self, what: String) -> GgufError {
        GgufError::Truncated {
            what,
            offset: self.offset,
            needed: self.needed,
            available: self.available,
        }
    }
}

impl<'a> Cursor<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub(super) fn offset(&self) -> u64 {
        self.pos as u64
    }

    pub(super) fn remaining(&self) -> u64 {
        self.bytes.len().saturating_sub(self.pos) as u64
    }

    pub(super) fn take(&mut self, n: u64) -> Result<&'a [u8], Short> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let taken = usize::try_from(n)
            .ok()
            .and_then(|n| rest.get(..n))
            .ok_or(Short {
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            })?;
        self.pos += taken.len();
        Ok(taken)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], Short> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    pub(super) fn u32(&mut self) -> Result<u32, Short> {
        self.array().map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self) -> Result<u64, Short> {
        self.array().map(u64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_stops_at_the_end() {
        let mut cursor = Cursor::new(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!(cursor.u32().unwrap(), 1);
        assert_eq!(cursor.u64().unwrap(), 2);
        assert_eq!(cursor.offset(), 12);
        let short = cursor.u32().unwrap_err();
        assert_eq!((short.offset, short.needed, short.available), (12, 4, 1));
        assert_eq!(
            cursor.take(1).unwrap(),
            [9],
            "a failed read consumes nothing"
        );
        assert!(cursor.take(u64::MAX).is_err());
        assert_eq!(cursor.remaining(), 0);
    }
}
