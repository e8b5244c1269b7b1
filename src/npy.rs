//! NumPy `.npy` files of little-endian f32 in C order: how `qwen35 eval` hands logits to outside
//! tools and reads reference logits back.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a .npy file (bad magic)")]
    BadMagic { path: String },
    #[error("{path}: unsupported .npy version {major}")]
    Version { path: String, major: u8 },
    #[error("{path}: malformed header: {why}")]
    Header { path: String, why: String },
    #[error("{path}: dtype {descr} is not supported (only little-endian f32 '<f4')")]
    Dtype { path: String, descr: String },
    #[error("{path}: Fortran-ordered arrays are not supported")]
    FortranOrder { path: String },
    #[error("{path}: shape {shape:?} needs {expected} bytes of data but the file holds {found}")]
    Size {
        path: String,
        shape: Vec<usize>,
        expected: usize,
        found: usize,
    },
}

/// Writes `data` (row-major, `shape`) as a version 1.0 `.npy` file of `<f4`.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> io::Result<()> {
    let n: usize = shape.iter().product();
    if n != data.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("shape {shape:?} holds {n} values, data has {}", data.len()),
        ));
    }
    let dims = match shape {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    // The header, with magic, version and length, is padded with spaces to a multiple of 64
    // bytes and ends in a newline, so the data that follows is aligned.
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = io::BufWriter::new(fs::File::create(path)?);
    out.write_all(MAGIC)?;
    out.write_all(&[1, 0])?;
    out.write_all(&(header.len() as u16).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    for v in data {
        out.write_all(&v.to_le_bytes())?;
    }
    out.flush()
}

/// Reads a `.npy` file of little-endian f32 in C order: (shape, values).
pub fn read_f32(path: &Path) -> Result<(Vec<usize>, Vec<f32>), NpyError> {
    let name = path.display().to_string();
    let bytes = fs::read(path).map_err(|source| NpyError::Io {
        path: name.clone(),
        source,
    })?;
    parse_f32(&bytes).map_err(|e| e.at(&name))
}

/// A parse failure before the file name is attached.
enum Fault {
    BadMagic,
    Version(u8),
    Header(String),
    Dtype(String),
    FortranOrder,
    Size(Vec<usize>, usize, usize),
}

impl Fault {
    fn at(self, path: &str) -> NpyError {
        let path = path.to_string();
        match self {
            Fault::BadMagic => NpyError::BadMagic { path },
            Fault::Version(major) => NpyError::Version { path, major },
            Fault::Header(why) => NpyError::Header { path, why },
            Fault::Dtype(descr) => NpyError::Dtype { path, descr },
            Fault::FortranOrder => NpyError::FortranOrder { path },
            Fault::Size(shape, expected, found) => NpyError::Size {
                path,
                shape,
                expected,
                found,
            },
        }
    }
}

fn parse_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), Fault> {
    if !bytes.starts_with(MAGIC) {
        return Err(Fault::BadMagic);
    }
    let truncated = || Fault::Header("file ends inside the header".into());
    let major = *bytes.get(6).ok_or_else(truncated)?;
    let (len_bytes, header_start) = match major {
        1 => (2, 10),
        2 | 3 => (4, 12),
        _ => return Err(Fault::Version(major)),
    };
    let len_field = bytes.get(8..8 + len_bytes).ok_or_else(truncated)?;
    let header_len = len_field
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | b as usize);
    let data_start = header_start + header_len;
    let header = bytes.get(header_start..data_start).ok_or_else(truncated)?;
    let header = std::str::from_utf8(header).map_err(|_| Fault::Header("not UTF-8".into()))?;

    let descr = dict_value(header, "descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if descr != "<f4" {
        return Err(Fault::Dtype(descr.to_string()));
    }
    if dict_value(header, "fortran_order")? != "False" {
        return Err(Fault::FortranOrder);
    }
    let shape = parse_shape(dict_value(header, "shape")?)?;

    let expected = shape
        .iter()
        .try_fold(4usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Fault::Header(format!("shape {shape:?} overflows")))?;
    let data = &bytes[data_start..];
    if data.len() != expected {
        return Err(Fault::Size(shape, expected, data.len()));
    }
    let values = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((shape, values))
}

/// The text of `key`'s value in the header's Python dict literal, up to the next top-level comma.
fn dict_value<'h>(header: &'h str, key: &str) -> Result<&'h str, Fault> {
    let missing = || Fault::Header(format!("no '{key}' entry"));
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))
        .ok_or_else(missing)?;
    let rest = &header[at + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':').ok_or_else(missing)?;
    let rest = rest.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')').map(|i| i + 1)
    } else {
        rest.find([',', '}'])
    }
    .ok_or_else(missing)?;
    Ok(rest[..end].trim())
}

fn parse_shape(text: &str) -> Result<Vec<usize>, Fault> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| Fault::Header(format!("shape {text} is not a tuple")))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse()
                .map_err(|_| Fault::Header(format!("shape entry {d} is not a number")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("qwen35-npy-{}-{name}", std::process::id()))
    }

    #[test]
    fn round_trips_shapes_and_values() {
        for shape in [vec![7], vec![3, 5], vec![2, 1, 4], vec![0, 9]] {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| i as f32 * -0.37 + 1e-3).collect();
            let path = temp("rt.npy");
            write_f32(&path, &shape, &data).unwrap();
            let bytes = fs::read(&path).unwrap();
            assert_eq!((bytes.len() - data.len() * 4) % 64, 0, "header not aligned");
            let (s, d) = read_f32(&path).unwrap();
            assert_eq!(s, shape);
            assert_eq!(d, data);
            fs::remove_file(path).ok();
        }
    }

    #[test]
    fn rejects_wrong_dtype_truncation_and_garbage() {
        let path = temp("bad.npy");
        write_f32(&path, &[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let good = fs::read(&path).unwrap();

        let mut f8 = good.clone();
        let at = f8.windows(3).position(|w| w == b"<f4").unwrap();
        f8[at + 2] = b'8';
        assert!(matches!(parse_f32(&f8), Err(Fault::Dtype(d)) if d == "<f8"));
        assert!(matches!(
            parse_f32(&good[..good.len() - 3]),
            Err(Fault::Size(_, 16, 13))
        ));
        for cut in 0..70 {
            assert!(parse_f32(&good[..cut]).is_err(), "cut at {cut} accepted");
        }
        assert!(matches!(parse_f32(b"PK\x03\x04"), Err(Fault::BadMagic)));
        let err = read_f32(&temp("missing.npy")).unwrap_err();
        assert!(err.to_string().contains("missing.npy"));
        fs::remove_file(path).ok();
    }

    #[test]
    fn reads_numpy_style_headers() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut bytes = MAGIC.to_vec();
        bytes.extend([1, 0]);
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header.as_bytes());
        for i in 0..6 {
            bytes.extend((i as f32).to_le_bytes());
        }
        let (shape, values) = parse_f32(&bytes).ok().unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(values[5], 5.0);
    }
}
