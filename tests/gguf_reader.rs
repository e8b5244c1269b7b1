//! GGUF reader and writer: round trips, typed getters, and a corpus of hostile files made by
//! mutating a valid one, each of which must fail with the right error naming the right place.

use std::time::{Duration, Instant};

use qwen35::gguf::{GgufError, GgufFile, GgufWriter, MetaArray, MetaValue, MAX_ARRAY_DEPTH};
use qwen35::quant::GgmlType;

/// Every scalar type, a string that is not ASCII, flat and nested arrays.
fn sample_metadata() -> Vec<(&'static str, MetaValue)> {
    vec![
        ("general.architecture", MetaValue::Str("qwen35".into())),
        ("general.alignment", MetaValue::U32(32)),
        ("test.u8", MetaValue::U8(200)),
        ("test.i8", MetaValue::I8(-100)),
        ("test.u16", MetaValue::U16(60_000)),
        ("test.i16", MetaValue::I16(-30_000)),
        ("test.u32", MetaValue::U32(4_000_000_000)),
        ("test.i32", MetaValue::I32(-2_000_000_000)),
        ("test.f32", MetaValue::F32(1.5e-6)),
        ("test.bool", MetaValue::Bool(true)),
        ("test.str", MetaValue::Str("héllo wörld".into())),
        ("test.u64", MetaValue::U64(u64::MAX - 1)),
        ("test.i64", MetaValue::I64(i64::MIN + 1)),
        ("test.f64", MetaValue::F64(-2.5e300)),
        (
            "test.arr.u32",
            MetaValue::Array(MetaArray::U32(vec![11, 11, 10, 0])),
        ),
        (
            "test.arr.i32",
            MetaValue::Array(MetaArray::I32(vec![-1, 0, 5])),
        ),
        (
            "test.arr.f32",
            MetaValue::Array(MetaArray::F32(vec![0.5, -1.0])),
        ),
        (
            "test.arr.bool",
            MetaValue::Array(MetaArray::Bool(vec![true, false])),
        ),
        (
            "test.arr.str",
            MetaValue::Array(MetaArray::Str(vec![
                "Ġa".into(),
                String::new(),
                "bc".into(),
            ])),
        ),
        (
            "test.arr.u8",
            MetaValue::Array(MetaArray::U8(vec![1, 2, 255])),
        ),
        (
            "test.arr.i8",
            MetaValue::Array(MetaArray::I8(vec![-128, 127])),
        ),
        (
            "test.arr.u16",
            MetaValue::Array(MetaArray::U16(vec![65_535])),
        ),
        ("test.arr.i16", MetaValue::Array(MetaArray::I16(vec![-2]))),
        (
            "test.arr.u64",
            MetaValue::Array(MetaArray::U64(vec![1 << 40])),
        ),
        (
            "test.arr.i64",
            MetaValue::Array(MetaArray::I64(vec![-(1 << 40)])),
        ),
        ("test.arr.f64", MetaValue::Array(MetaArray::F64(vec![]))),
        (
            "test.arr.nested",
            MetaValue::Array(MetaArray::Array(vec![
                MetaArray::U8(vec![1, 2]),
                MetaArray::Str(vec!["x".into()]),
                MetaArray::Array(vec![MetaArray::I64(vec![7])]),
            ])),
        ),
        ("key.aa", MetaValue::U32(1)),
        ("key.ab", MetaValue::U32(2)),
    ]
}

/// (name, ne, type): a Q8_0 matrix of 2 rows and an F32 vector.
const SAMPLE_TENSORS: [(&str, &[u64], GgmlType); 2] = [
    ("t.one", &[64, 2], GgmlType::Q8_0),
    ("t.two", &[3], GgmlType::F32),
];

/// Distinct, recognizable data bytes for tensor `index`.
fn tensor_bytes(index: usize, n: u64) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7) ^ (index as u8 + 1))
        .collect()
}

fn sample_file(version: u32) -> Vec<u8> {
    let mut writer = GgufWriter::with_version(version).unwrap();
    for (key, value) in sample_metadata() {
        writer.add_kv(key, value).unwrap();
    }
    for (name, dims, ty) in SAMPLE_TENSORS {
        writer.add_tensor(name, dims, ty).unwrap();
    }
    let mut data = writer.write_header(Vec::new()).unwrap();
    let sizes = [2 * 2 * 34, 12];
    for (index, (name, _, _)) in SAMPLE_TENSORS.iter().enumerate() {
        data.write_tensor(name, &tensor_bytes(index, sizes[index]))
            .unwrap();
    }
    data.finish().unwrap()
}

fn open(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
    GgufFile::from_bytes(bytes)
}

// ---- round trips -------------------------------------------------------------------------

#[test]
fn round_trip_preserves_every_value_type_in_v2_and_v3() {
    for version in [2, 3] {
        let file = open(sample_file(version)).unwrap();
        assert_eq!(file.version(), version);
        let read: Vec<(String, MetaValue)> = file
            .metadata()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let written: Vec<(String, MetaValue)> = sample_metadata()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(read, written, "version {version}");
        assert_eq!(
            file.get("test.str"),
            Some(&MetaValue::Str("héllo wörld".into()))
        );
        assert_eq!(file.get("absent"), None);
    }
}

#[test]
fn round_trip_places_tensor_data_aligned_and_intact() {
    let bytes = sample_file(3);
    let file_len = bytes.len() as u64;
    let file = open(bytes).unwrap();
    assert_eq!(file.alignment(), 32);
    assert_eq!(file.data_offset() % 32, 0);
    assert_eq!(file.file_size(), file_len);
    assert_eq!(file.tensors().len(), 2);

    let one = file.tensor("t.one").unwrap();
    assert_eq!(one.dims, vec![64, 2]);
    assert_eq!(one.ggml_type, GgmlType::Q8_0);
    assert_eq!((one.n_elements, one.n_bytes), (128, 136));
    assert_eq!((one.cols(), one.rows(), one.row_bytes()), (64, 2, 68));
    assert_eq!(one.offset, file.data_offset());
    assert_eq!(file.tensor_data(one), tensor_bytes(0, 136).as_slice());

    let two = file.tensor("t.two").unwrap();
    assert_eq!((two.cols(), two.rows(), two.n_bytes), (3, 1, 12));
    assert_eq!(
        two.offset,
        file.data_offset() + 160,
        "136 bytes padded to 160"
    );
    assert_eq!(file.tensor_data(two), tensor_bytes(1, 12).as_slice());
    assert!(file.tensor("t.three").is_none());
}

#[test]
fn alignment_defaults_to_32_and_follows_the_key() {
    let mut writer = GgufWriter::new();
    writer.add_tensor("v", &[5], GgmlType::F32).unwrap();
    let mut data = writer.write_header(Vec::new()).unwrap();
    data.write_tensor("v", &[1; 20]).unwrap();
    let file = open(data.finish().unwrap()).unwrap();
    assert_eq!(
        (file.version(), file.alignment(), file.data_offset() % 32),
        (3, 32, 0)
    );

    let mut writer = GgufWriter::new();
    writer
        .add_kv("general.alignment", MetaValue::U32(256))
        .unwrap();
    writer.add_tensor("a", &[5], GgmlType::F32).unwrap();
    writer.add_tensor("b", &[32], GgmlType::F16).unwrap();
    let mut data = writer.write_header(Vec::new()).unwrap();
    data.write_tensor("a", &[1; 20]).unwrap();
    data.write_data(&[2; 30]).unwrap();
    data.write_data(&[3; 34]).unwrap();
    let file = open(data.finish().unwrap()).unwrap();
    assert_eq!(file.alignment(), 256);
    let b = file.tensor("b").unwrap();
    assert_eq!(b.offset, file.data_offset() + 256);
    assert_eq!(&file.tensor_data(b)[28..32], &[2, 2, 3, 3]);
}

#[test]
fn large_string_arrays_read_quickly() {
    let vocab: Vec<String> = (0..248_320).map(|i| format!("tok{i}")).collect();
    let mut writer = GgufWriter::new();
    writer
        .add_kv(
            "tokenizer.ggml.tokens",
            MetaValue::Array(MetaArray::Str(vocab.clone())),
        )
        .unwrap();
    let bytes = writer.write_header(Vec::new()).unwrap().finish().unwrap();
    let start = Instant::now();
    let file = open(bytes).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        file.get_str_array("tokenizer.ggml.tokens").unwrap(),
        vocab.as_slice()
    );
}

/// Written by gguf-py (tests/data/gguf/make_reference.py), llama.cpp's reference writer.
const GGUF_PY_REFERENCE: &[u8] = include_bytes!("data/gguf/gguf_py_reference.gguf");

#[test]
fn reads_a_file_written_by_gguf_py() {
    let file = open(GGUF_PY_REFERENCE.to_vec()).unwrap();
    assert_eq!((file.version(), file.alignment()), (3, 32));
    assert_eq!(file.get_str("general.architecture").unwrap(), "qwen35");
    assert_eq!(file.get("test.u8"), Some(&MetaValue::U8(200)));
    assert_eq!(file.get("test.i16"), Some(&MetaValue::I16(-30_000)));
    assert_eq!(file.get("test.u64"), Some(&MetaValue::U64(u64::MAX - 1)));
    assert_eq!(file.get("test.f64"), Some(&MetaValue::F64(-2.5)));
    assert_eq!(file.get("test.bool"), Some(&MetaValue::Bool(true)));
    assert_eq!(file.get_str("test.str").unwrap(), "héllo");
    assert_eq!(
        file.get_str_array("test.arr.str").unwrap(),
        ["Ġa", "", "bc"]
    );
    assert_eq!(file.get_i32_array("test.arr.i32").unwrap(), vec![-1, 0, 5]);
    let nested = file.get_array("test.arr.nested").unwrap();
    assert!(
        matches!(nested, MetaArray::Array(inner) if inner.len() == 2),
        "{nested:?}"
    );

    let vec = file.tensor("t.vec").unwrap();
    assert_eq!(
        (vec.dims.as_slice(), vec.ggml_type),
        (&[3][..], GgmlType::F32)
    );
    let values: Vec<f32> = file
        .tensor_data(vec)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values, [1.0, -2.0, 0.5]);
    let f16 = file.tensor("t.f16").unwrap();
    assert_eq!(
        (f16.cols(), f16.rows(), f16.ggml_type),
        (4, 2, GgmlType::F16)
    );
    let q8 = file.tensor("t.q8").unwrap();
    assert_eq!((q8.cols(), q8.rows(), q8.n_bytes), (64, 2, 4 * 34));
    assert_eq!(q8.ggml_type, GgmlType::Q8_0);
}

#[test]
fn rewriting_the_gguf_py_file_reproduces_it_byte_for_byte() {
    let file = open(GGUF_PY_REFERENCE.to_vec()).unwrap();
    let mut writer = GgufWriter::with_version(file.version()).unwrap();
    for (key, value) in file.metadata() {
        writer.add_kv(key, value.clone()).unwrap();
    }
    for tensor in file.tensors() {
        writer
            .add_tensor(&tensor.name, &tensor.dims, tensor.ggml_type)
            .unwrap();
    }
    let mut data = writer.write_header(Vec::new()).unwrap();
    for tensor in file.tensors() {
        data.write_tensor(&tensor.name, file.tensor_data(tensor))
            .unwrap();
    }
    assert!(data.finish().unwrap() == GGUF_PY_REFERENCE);
}

// ---- typed getters -----------------------------------------------------------------------

#[test]
fn typed_getters_convert_what_fits_and_name_the_key_otherwise() {
    let file = open(sample_file(3)).unwrap();
    assert_eq!(file.get_u32("test.u8").unwrap(), 200);
    assert_eq!(file.get_u64("test.u32").unwrap(), 4_000_000_000);
    assert_eq!(file.get_u64("test.u64").unwrap(), u64::MAX - 1);
    assert_eq!(file.get_i64("test.i64").unwrap(), i64::MIN + 1);
    assert_eq!(file.get_f32("test.f32").unwrap(), 1.5e-6);
    assert_eq!(file.get_f32("test.f64").unwrap(), f32::NEG_INFINITY);
    assert!(file.get_bool("test.bool").unwrap());
    assert_eq!(file.get_str("general.architecture").unwrap(), "qwen35");
    assert_eq!(
        file.get_str_array("test.arr.str").unwrap(),
        ["Ġa", "", "bc"]
    );
    assert_eq!(
        file.get_u32_array("test.arr.u32").unwrap(),
        vec![11, 11, 10, 0]
    );
    assert_eq!(
        file.get_i32_array("test.arr.u32").unwrap(),
        vec![11, 11, 10, 0]
    );
    assert_eq!(file.get_i32_array("test.arr.i32").unwrap(), vec![-1, 0, 5]);
    assert_eq!(file.get_f32_array("test.arr.f32").unwrap(), [0.5, -1.0]);
    assert_eq!(file.get_array("test.arr.nested").unwrap().len(), 3);
    assert_eq!(file.get_u32_opt("absent").unwrap(), None);
    assert_eq!(file.get_str_array_opt("absent").unwrap(), None);
    assert_eq!(file.get_u32_opt("test.u16").unwrap(), Some(60_000));

    let err = file.get_u32("test.i32").unwrap_err();
    assert!(matches!(err, GgufError::OutOfRange { .. }), "{err}");
    assert!(err.to_string().contains("\"test.i32\""), "{err}");
    let err = file.get_u32("test.u64").unwrap_err();
    assert!(matches!(err, GgufError::OutOfRange { .. }), "{err}");
    let err = file.get_u32_array("test.arr.i32").unwrap_err();
    assert!(
        matches!(err, GgufError::OutOfRange { .. }) && err.to_string().contains("test.arr.i32")
    );
    let err = file.get_u64("test.str").unwrap_err();
    assert!(matches!(err, GgufError::WrongType { .. }) && err.to_string().contains("test.str"));
    let err = file.get_str_array("test.arr.u32").unwrap_err();
    assert!(err.to_string().contains("array of u32"), "{err}");
    let err = file.get_i32_array("test.arr.f32").unwrap_err();
    assert!(matches!(err, GgufError::WrongType { .. }), "{err}");
    let err = file.get_f32("test.u8").unwrap_err();
    assert!(matches!(err, GgufError::WrongType { .. }), "{err}");
    let err = file.get_str("qwen35.block_count").unwrap_err();
    assert!(matches!(err, GgufError::MissingKey { .. }));
    assert!(err.to_string().contains("qwen35.block_count"));
}

#[test]
fn gguf_file_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<GgufFile>();
}

// ---- writer misuse -----------------------------------------------------------------------

#[test]
fn writer_refuses_what_the_reader_would_refuse() {
    assert!(matches!(
        GgufWriter::with_version(1),
        Err(GgufError::UnsupportedVersion { version: 1 })
    ));
    let mut writer = GgufWriter::new();
    writer.add_kv("k", MetaValue::U8(1)).unwrap();
    assert!(matches!(
        writer.add_kv("k", MetaValue::U8(2)),
        Err(GgufError::DuplicateKey { .. })
    ));
    assert!(matches!(
        writer.add_kv("general.alignment", MetaValue::U32(48)),
        Err(GgufError::BadAlignment { .. })
    ));
    writer.add_tensor("w", &[32, 4], GgmlType::Q8_0).unwrap();
    assert!(matches!(
        writer.add_tensor("w", &[1], GgmlType::F32),
        Err(GgufError::DuplicateTensor { .. })
    ));
    assert!(matches!(
        writer.add_tensor("x", &[31], GgmlType::Q8_0),
        Err(GgufError::NotWholeBlocks { .. })
    ));
    assert!(matches!(
        writer.add_tensor("x", &[1, 0], GgmlType::F32),
        Err(GgufError::ZeroDim { .. })
    ));
    assert!(matches!(
        writer.add_tensor("x", &[1, 1, 1, 1, 1], GgmlType::F32),
        Err(GgufError::TooManyDims { .. })
    ));
    assert!(matches!(
        writer.add_kv("general.alignment", MetaValue::U32(64)),
        Err(GgufError::BadAlignment { .. })
    ));
}

#[test]
fn writer_checks_order_and_sizes_of_streamed_data() {
    let mut writer = GgufWriter::new();
    writer.add_tensor("a", &[4], GgmlType::F32).unwrap();
    writer.add_tensor("b", &[2], GgmlType::F16).unwrap();
    let mut data = writer.write_header(Vec::new()).unwrap();
    assert_eq!(data.next_tensor(), Some("a"));
    let err = data.write_tensor("b", &[0; 4]).unwrap_err();
    assert!(matches!(err, GgufError::TensorOutOfOrder { .. }) && err.to_string().contains("\"a\""));
    let err = data.write_tensor("a", &[0; 15]).unwrap_err();
    assert!(matches!(
        err,
        GgufError::DataSizeMismatch {
            declared: 16,
            written: 15,
            ..
        }
    ));
    data.write_data(&[0; 10]).unwrap();
    assert!(matches!(
        data.write_data(&[0; 7]),
        Err(GgufError::DataSizeMismatch { written: 17, .. })
    ));
    assert!(matches!(
        data.write_tensor("a", &[0; 16]),
        Err(GgufError::TensorOutOfOrder { .. })
    ));
    data.write_data(&[0; 6]).unwrap();
    assert_eq!(data.next_tensor(), Some("b"));
    data.write_data(&[0; 1]).unwrap();
    let err = data.finish().unwrap_err();
    assert!(
        matches!(err, GgufError::DataSizeMismatch { written: 1, .. })
            && err.to_string().contains("\"b\"")
    );

    let mut writer = GgufWriter::new();
    writer.add_tensor("a", &[1], GgmlType::I8).unwrap();
    let mut data = writer.write_header(Vec::new()).unwrap();
    data.write_tensor("a", &[9]).unwrap();
    assert_eq!(data.next_tensor(), None);
    assert!(matches!(
        data.write_data(&[1]),
        Err(GgufError::ExtraData { bytes: 1 })
    ));
    let bytes = data.finish().unwrap();
    assert_eq!(bytes.len() % 32, 0, "the last tensor is padded too");
}

// ---- hostile files -----------------------------------------------------------------------

/// Position of the only occurrence of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "{:?} occurs {} times",
        String::from_utf8_lossy(needle),
        hits.len()
    );
    hits[0]
}

/// Position of `s` as a GGUF string (u64 length prefix, then bytes) in `bytes`.
fn find_gguf_str(bytes: &[u8], s: &str) -> usize {
    let mut encoded = (s.len() as u64).to_le_bytes().to_vec();
    encoded.extend_from_slice(s.as_bytes());
    find(bytes, &encoded)
}

/// Offset of the value type (u32) that follows metadata key `key`; its value follows at +4.
fn value_type_at(bytes: &[u8], key: &str) -> usize {
    find_gguf_str(bytes, key) + 8 + key.len()
}

/// Offset of the n_dims field of tensor `name`'s info.
fn n_dims_at(bytes: &[u8], name: &str) -> usize {
    find_gguf_str(bytes, name) + 8 + name.len()
}

/// Offsets of the ne values, the type id and the data offset of tensor `name` (of `n_dims` dims).
fn tensor_fields(bytes: &[u8], name: &str, n_dims: usize) -> (usize, usize, usize) {
    let dims = n_dims_at(bytes, name) + 4;
    let ty = dims + 8 * n_dims;
    (dims, ty, ty + 4)
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Opens `bytes` expecting failure; returns the error and its message.
fn refused(bytes: Vec<u8>) -> (GgufError, String) {
    let err = open(bytes).unwrap_err();
    let message = err.to_string();
    (err, message)
}

fn mutated(mutate: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = sample_file(3);
    mutate(&mut bytes);
    bytes
}

#[test]
fn truncation_at_every_byte_is_an_error_that_says_where() {
    let bytes = sample_file(3);
    let file = open(bytes.clone()).unwrap();
    let data_offset = file.data_offset() as usize;
    let data_end = file
        .tensors()
        .iter()
        .map(|t| t.offset + t.n_bytes)
        .max()
        .unwrap() as usize;
    assert!(data_end < bytes.len(), "the sample ends with padding");
    for cut in 0..bytes.len() {
        let truncated = bytes[..cut].to_vec();
        if cut >= data_end {
            // Only the padding after the last tensor is missing: nothing is lost.
            assert!(open(truncated).is_ok(), "cut at {cut}");
            continue;
        }
        let (err, message) = refused(truncated);
        if cut < data_offset {
            let header_error = matches!(
                err,
                GgufError::Truncated { .. }
                    | GgufError::CountTooLarge { .. }
                    | GgufError::DataOutOfBounds { .. }
            );
            assert!(header_error, "cut at {cut}: {message}");
        } else {
            assert!(
                matches!(err, GgufError::DataOutOfBounds { .. }),
                "cut at {cut}: {message}"
            );
        }
        assert!(message.contains("offset"), "cut at {cut}: {message}");
    }
    let (err, message) = refused(Vec::new());
    assert!(
        matches!(err, GgufError::Truncated { offset: 0, .. }),
        "{message}"
    );
    assert!(message.contains("magic"), "{message}");
}

#[test]
fn truncation_inside_a_value_names_the_key_and_offset() {
    let bytes = sample_file(3);
    // The last metadata entry, so that the up-front count checks still pass.
    let at = value_type_at(&bytes, "key.ab") + 4;
    let (err, message) = refused(bytes[..at + 3].to_vec());
    assert!(
        matches!(
            err,
            GgufError::Truncated {
                needed: 4,
                available: 3,
                ..
            }
        ),
        "{message}"
    );
    assert!(
        message.contains("\"key.ab\"") && message.contains(&format!("offset {at}")),
        "{message}"
    );
}

#[test]
fn bad_magic() {
    let (err, message) = refused(mutated(|b| b[0..4].copy_from_slice(b"GGML")));
    assert!(
        matches!(err, GgufError::BadMagic { found } if &found == b"GGML"),
        "{message}"
    );
    assert!(message.contains("bytes 0..4"), "{message}");
}

#[test]
fn unsupported_versions() {
    for version in [0, 1, 4, u32::MAX] {
        let (err, message) = refused(mutated(|b| put_u32(b, 4, version)));
        assert!(
            matches!(err, GgufError::UnsupportedVersion { version: v } if v == version),
            "{message}"
        );
        assert!(message.contains("offset 4"), "{message}");
    }
    let (_, message) = refused(mutated(|b| put_u32(b, 4, 3u32.swap_bytes())));
    assert!(message.contains("big-endian"), "{message}");
}

#[test]
fn huge_tensor_and_kv_counts_are_refused_before_allocating() {
    for (at, what) in [(8, "tensor_count"), (16, "kv_count")] {
        for count in [1 << 40, u64::MAX] {
            let (err, message) = refused(mutated(|b| put_u64(b, at, count)));
            assert!(
                matches!(err, GgufError::CountTooLarge { count: c, .. } if c == count),
                "{message}"
            );
            assert!(
                message.contains(what) && message.contains(&format!("offset {at}")),
                "{message}"
            );
        }
    }
}

#[test]
fn tensor_count_beyond_what_follows_the_metadata_is_refused() {
    // Small enough to pass the check against the whole file, too large for what the metadata
    // leaves.
    let (err, message) = refused(mutated(|b| put_u64(b, 8, 30)));
    assert!(
        matches!(err, GgufError::CountTooLarge { count: 30, .. }),
        "{message}"
    );
    assert!(message.contains("tensor_count"), "{message}");
}

#[test]
fn huge_string_length() {
    let bytes = sample_file(3);
    let at = value_type_at(&bytes, "test.str") + 4;
    let (err, message) = refused(mutated(|b| put_u64(b, at, 1 << 60)));
    assert!(
        matches!(err, GgufError::CountTooLarge { count, .. } if count == 1 << 60),
        "{message}"
    );
    assert!(
        message.contains("\"test.str\"") && message.contains(&format!("offset {at}")),
        "{message}"
    );

    let key_at = find_gguf_str(&bytes, "test.u16");
    let (err, message) = refused(mutated(|b| put_u64(b, key_at, u64::MAX)));
    assert!(matches!(err, GgufError::CountTooLarge { .. }), "{message}");
    assert!(message.contains("key of metadata entry 4"), "{message}");
}

#[test]
fn huge_array_length() {
    let bytes = sample_file(3);
    let at = value_type_at(&bytes, "test.arr.u32") + 4 + 4;
    assert_eq!(get_u64(&bytes, at), 4);
    for count in [1 << 40, 5] {
        let (err, message) = refused(mutated(|b| put_u64(b, at, count)));
        if count == 5 {
            // One element more than present: the next key's bytes are read as the element and
            // the parse fails further on, but it must fail.
            continue;
        }
        assert!(
            matches!(err, GgufError::CountTooLarge { count: c, .. } if c == count),
            "{message}"
        );
        assert!(
            message.contains("\"test.arr.u32\"") && message.contains(&format!("offset {at}")),
            "{message}"
        );
    }
    let nested_at = value_type_at(&bytes, "test.arr.nested") + 4 + 4;
    let (err, message) = refused(mutated(|b| put_u64(b, nested_at, 1 << 40)));
    assert!(matches!(err, GgufError::CountTooLarge { .. }), "{message}");
    assert!(
        message.contains("array of key \"test.arr.nested\""),
        "{message}"
    );
}

#[test]
fn unknown_value_types() {
    let bytes = sample_file(3);
    let at = value_type_at(&bytes, "test.u8");
    let (err, message) = refused(mutated(|b| put_u32(b, at, 13)));
    assert!(
        matches!(err, GgufError::UnknownValueType { type_id: 13, .. }),
        "{message}"
    );
    assert!(
        message.contains("\"test.u8\"") && message.contains(&format!("offset {at}")),
        "{message}"
    );

    let element_at = value_type_at(&bytes, "test.arr.i32") + 4;
    let (err, message) = refused(mutated(|b| put_u32(b, element_at, 99)));
    assert!(
        matches!(err, GgufError::UnknownValueType { type_id: 99, .. }),
        "{message}"
    );
    assert!(message.contains("\"test.arr.i32\""), "{message}");
}

#[test]
fn invalid_bool() {
    let bytes = sample_file(3);
    let at = value_type_at(&bytes, "test.bool") + 4;
    let (err, message) = refused(mutated(|b| b[at] = 2));
    assert!(
        matches!(err, GgufError::InvalidBool { byte: 2, .. }),
        "{message}"
    );
    assert!(
        message.contains("\"test.bool\"") && message.contains(&format!("offset {at}")),
        "{message}"
    );
}

#[test]
fn invalid_utf8_in_values_keys_and_tensor_names() {
    let bytes = sample_file(3);
    let at = value_type_at(&bytes, "test.str") + 4 + 8;
    let (err, message) = refused(mutated(|b| b[at + 1] = 0xff));
    assert!(
        matches!(err, GgufError::InvalidUtf8 { offset, .. } if offset == at as u64),
        "{message}"
    );
    assert!(message.contains("\"test.str\""), "{message}");

    let key_at = find_gguf_str(&bytes, "key.ab") + 8;
    let (err, message) = refused(mutated(|b| b[key_at] = 0xc3));
    assert!(matches!(err, GgufError::InvalidUtf8 { .. }), "{message}");
    assert!(message.contains("key of metadata entry 28"), "{message}");

    let name_at = find_gguf_str(&bytes, "t.two") + 8;
    let (err, message) = refused(mutated(|b| b[name_at + 4] = 0x80));
    assert!(matches!(err, GgufError::InvalidUtf8 { .. }), "{message}");
    assert!(message.contains("name of tensor info 1"), "{message}");
}

#[test]
fn arrays_nested_too_deep() {
    let mut array = MetaArray::U8(vec![1]);
    for _ in 0..MAX_ARRAY_DEPTH {
        array = MetaArray::Array(vec![array]);
    }
    let mut writer = GgufWriter::new();
    writer.add_kv("deep", MetaValue::Array(array)).unwrap();
    let (err, message) = refused(writer.write_header(Vec::new()).unwrap().finish().unwrap());
    assert!(matches!(err, GgufError::ArrayTooDeep { .. }), "{message}");
    assert!(
        message.contains("\"deep\"") && message.contains("offset"),
        "{message}"
    );
}

#[test]
fn duplicate_metadata_key() {
    let bytes = sample_file(3);
    let at = find_gguf_str(&bytes, "key.ab");
    let (err, message) = refused(mutated(|b| b[at + 8 + 5] = b'a'));
    assert!(
        matches!(err, GgufError::DuplicateKey { offset: Some(o), .. } if o == at as u64),
        "{message}"
    );
    assert!(
        message.contains("\"key.aa\"") && message.contains(&format!("offset {at}")),
        "{message}"
    );
}

#[test]
fn bad_alignment_values() {
    let bytes = sample_file(3);
    let at = value_type_at(&bytes, "general.alignment") + 4;
    for alignment in [0, 24, 1 << 31 | 1] {
        let (err, message) = refused(mutated(|b| put_u32(b, at, alignment)));
        assert!(matches!(err, GgufError::BadAlignment { .. }), "{message}");
        assert!(
            message.contains("general.alignment") && message.contains(&alignment.to_string()),
            "{message}"
        );
    }
    let type_at = at - 4;
    let (err, message) = refused(mutated(|b| put_u32(b, type_at, 6))); // the same bits as an f32
    assert!(matches!(err, GgufError::BadAlignment { .. }), "{message}");
}

#[test]
fn unknown_ggml_type() {
    let bytes = sample_file(3);
    let (_, ty_at, _) = tensor_fields(&bytes, "t.one", 2);
    let info_at = find_gguf_str(&bytes, "t.one");
    for id in [4, 31, 1000] {
        let (err, message) = refused(mutated(|b| put_u32(b, ty_at, id)));
        assert!(
            matches!(err, GgufError::UnknownGgmlType { type_id, .. } if type_id == id),
            "{message}"
        );
        assert!(
            message.contains("\"t.one\"") && message.contains(&format!("offset {info_at}")),
            "{message}"
        );
    }
}

#[test]
fn too_many_dims() {
    let bytes = sample_file(3);
    let at = n_dims_at(&bytes, "t.one");
    for n_dims in [5, u32::MAX] {
        let (err, message) = refused(mutated(|b| put_u32(b, at, n_dims)));
        assert!(
            matches!(err, GgufError::TooManyDims { n_dims: n, .. } if n == n_dims as u64),
            "{message}"
        );
        assert!(
            message.contains("\"t.one\"") && message.contains("offset"),
            "{message}"
        );
    }
}

#[test]
fn zero_dimension() {
    let bytes = sample_file(3);
    let (dims_at, _, _) = tensor_fields(&bytes, "t.one", 2);
    let (err, message) = refused(mutated(|b| put_u64(b, dims_at + 8, 0)));
    assert!(matches!(err, GgufError::ZeroDim { .. }), "{message}");
    assert!(
        message.contains("\"t.one\"") && message.contains("[64, 0]"),
        "{message}"
    );

    // n_dims = 0 describes no shape at all.
    let n_dims_at = n_dims_at(&bytes, "t.two");
    let mut no_dims = bytes.clone();
    put_u32(&mut no_dims, n_dims_at, 0);
    no_dims.drain(n_dims_at + 4..n_dims_at + 12);
    let (err, message) = refused(no_dims);
    assert!(matches!(err, GgufError::ZeroDim { .. }), "{message}");
}

#[test]
fn overflowing_dimensions() {
    let bytes = sample_file(3);
    let (dims_at, _, _) = tensor_fields(&bytes, "t.one", 2);
    let (err, message) = refused(mutated(|b| {
        put_u64(b, dims_at, 1 << 40);
        put_u64(b, dims_at + 8, 1 << 40);
    }));
    assert!(matches!(err, GgufError::SizeOverflow { .. }), "{message}");
    assert!(message.contains("\"t.one\""), "{message}");

    // Fits in u64 but not in ggml's i64 element count.
    let (err, _) = refused(mutated(|b| {
        put_u64(b, dims_at, 1 << 32);
        put_u64(b, dims_at + 8, 1 << 31);
    }));
    assert!(matches!(err, GgufError::SizeOverflow { .. }), "{err}");
}

#[test]
fn rows_that_are_not_whole_blocks() {
    let bytes = sample_file(3);
    let (dims_at, _, _) = tensor_fields(&bytes, "t.one", 2);
    let (err, message) = refused(mutated(|b| put_u64(b, dims_at, 33)));
    assert!(
        matches!(err, GgufError::NotWholeBlocks { ne0: 33, .. }),
        "{message}"
    );
    assert!(
        message.contains("\"t.one\"") && message.contains("q8_0"),
        "{message}"
    );
}

#[test]
fn misaligned_data_offset() {
    let bytes = sample_file(3);
    let (_, _, offset_at) = tensor_fields(&bytes, "t.two", 1);
    assert_eq!(get_u64(&bytes, offset_at), 160);
    let (err, message) = refused(mutated(|b| put_u64(b, offset_at, 161)));
    assert!(
        matches!(
            err,
            GgufError::MisalignedOffset {
                offset: 161,
                alignment: 32,
                ..
            }
        ),
        "{message}"
    );
    assert!(
        message.contains("\"t.two\"") && message.contains("161"),
        "{message}"
    );
}

#[test]
fn data_out_of_file_bounds() {
    let bytes = sample_file(3);
    let (_, _, offset_at) = tensor_fields(&bytes, "t.two", 1);
    for offset in [192, 1 << 40, u64::MAX - 31] {
        let (err, message) = refused(mutated(|b| put_u64(b, offset_at, offset)));
        assert!(
            matches!(err, GgufError::DataOutOfBounds { relative, .. } if relative == offset),
            "{message}"
        );
        assert!(
            message.contains("\"t.two\"") && message.contains(&bytes.len().to_string()),
            "{message}"
        );
    }
}

#[test]
fn overlapping_tensor_data() {
    let bytes = sample_file(3);
    let (_, _, offset_at) = tensor_fields(&bytes, "t.two", 1);
    for offset in [0, 128] {
        let (err, message) = refused(mutated(|b| put_u64(b, offset_at, offset)));
        assert!(
            matches!(err, GgufError::OverlappingTensors { .. }),
            "{message}"
        );
        assert!(
            message.contains("\"t.one\"") && message.contains("\"t.two\""),
            "{message}"
        );
    }
}

#[test]
fn duplicate_tensor_name() {
    let bytes = sample_file(3);
    let at = find_gguf_str(&bytes, "t.two");
    let (err, message) = refused(mutated(|b| {
        b[at + 8 + 2..at + 8 + 5].copy_from_slice(b"one")
    }));
    assert!(
        matches!(err, GgufError::DuplicateTensor { offset: Some(o), .. } if o == at as u64),
        "{message}"
    );
    assert!(
        message.contains("\"t.one\"") && message.contains(&format!("offset {at}")),
        "{message}"
    );
}

#[test]
fn random_corruption_never_panics() {
    let bytes = sample_file(3);
    let header_len = open(bytes.clone()).unwrap().data_offset() as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut refused_count = 0;
    for _ in 0..5000 {
        let mut corrupt = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % header_len as u64) as usize;
            corrupt[at] = next() as u8;
        }
        if open(corrupt).is_err() {
            refused_count += 1;
        }
    }
    assert!(
        refused_count > 1000,
        "only {refused_count} of 5000 corruptions were noticed"
    );
}

// ---- mapped files --------------------------------------------------------------------------

struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp_file(tag: &str, bytes: &[u8]) -> TempFile {
    let path = std::env::temp_dir().join(format!("qwen35-gguf-{tag}-{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    TempFile(path)
}

#[test]
fn open_maps_a_file_and_reports_missing_ones() {
    let bytes = sample_file(2);
    let temp = temp_file("open", &bytes);
    let file = GgufFile::open(&temp.0).unwrap();
    assert_eq!(file.version(), 2);
    assert_eq!(file.file_size(), bytes.len() as u64);
    let one = file.tensor("t.one").unwrap();
    assert_eq!(file.tensor_data(one), tensor_bytes(0, 136).as_slice());

    let err = GgufFile::open(temp.0.with_extension("absent")).unwrap_err();
    assert!(
        matches!(err, GgufError::Io { .. }) && err.to_string().contains("absent"),
        "{err}"
    );
}

#[test]
fn opening_a_file_with_a_huge_sparse_tail_reads_only_the_header() {
    let temp = temp_file("sparse", &sample_file(3));
    let huge = 8u64 << 30;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&temp.0)
        .unwrap()
        .set_len(huge)
        .unwrap();
    let start = Instant::now();
    let file = GgufFile::open(&temp.0).unwrap();
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_millis(500),
        "opening took {elapsed:?}"
    );
    assert_eq!(file.file_size(), huge);
    assert_eq!(
        file.tensor_data(file.tensor("t.two").unwrap()),
        tensor_bytes(1, 12).as_slice()
    );
}
