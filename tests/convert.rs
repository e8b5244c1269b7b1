//! `qwen35 convert` on the bundled fixture's Hugging Face checkpoint (`tests/fixtures/hf/`):
//! against llama.cpp b11434's converter output (digests in `tests/fixtures/hf-llama-cpp-b11434.json`,
//! made by `benches/results/convert-2026-12-04/digest_gguf.py`) and against the committed
//! `tiny-f32.gguf`.

use qwen35::convert::{convert, ConvertOptions, OutType};
use qwen35::gguf::GgufFile;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qwen35-convert-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options(out_type: OutType) -> ConvertOptions {
    ConvertOptions {
        out_type,
        no_mtp: false,
        force: false,
    }
}

fn convert_fixture(out_type: OutType, out: &Path) {
    convert(
        &fixtures().join("hf"),
        out,
        &options(out_type),
        |_, _, _| {},
    )
    .unwrap();
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Two F32 tensors' raw bits within one unit in the last place of each other.
fn within_one_ulp(a: &[u32], b: &[u32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.abs_diff(*y) <= 1)
}

fn f32_bits(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The header (metadata, tensor infos, padding) is byte-identical to llama.cpp's; so is every
/// tensor's data except `ssm_a`, where llama.cpp's torch takes MKL's exp (within 1 ulp of the
/// correctly rounded value this converter writes).
#[test]
fn every_out_type_matches_llama_cpp_convert_hf_to_gguf() {
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("hf-llama-cpp-b11434.json")).unwrap(),
    )
    .unwrap();
    let dir = scratch("llama");
    for out_type in OutType::ALL {
        let expected = &reference[out_type.name()];
        let out = dir.join(format!("{}.gguf", out_type.name()));
        convert_fixture(out_type, &out);
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(bytes.len() as u64, expected["bytes"].as_u64().unwrap());
        let file = GgufFile::open(&out).unwrap();
        let header = &bytes[..file.data_offset() as usize];
        assert_eq!(
            sha256(header),
            expected["header_sha256"].as_str().unwrap(),
            "{}: header differs from llama.cpp's",
            out_type.name()
        );
        let expected_tensors = expected["tensor_sha256"].as_object().unwrap();
        assert_eq!(file.tensors().len(), expected_tensors.len());
        let mut ssm_a_identical = 0;
        for tensor in file.tensors() {
            let data = file.tensor_data(tensor);
            if tensor.name.ends_with(".ssm_a") {
                let want: Vec<u32> = expected["ssm_a_bits"][&tensor.name]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect();
                assert!(
                    within_one_ulp(&f32_bits(data), &want),
                    "{}: {}",
                    out_type.name(),
                    tensor.name
                );
                ssm_a_identical += usize::from(f32_bits(data) == want);
                continue;
            }
            assert_eq!(
                sha256(data),
                expected_tensors[&tensor.name].as_str().unwrap(),
                "{}: tensor {} differs from llama.cpp's",
                out_type.name(),
                tensor.name
            );
        }
        // Of the three ssm_a tensors, llama.cpp's exp rounds one value of blk.1 the other way.
        assert_eq!(ssm_a_identical, 2, "{}", out_type.name());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Against the committed fixture (written by scripts/make_fixture.py through gguf-py, with numpy's
/// exp for ssm_a): the same tensors, and every metadata value the fixture has, but its name.
#[test]
fn f32_conversion_equals_the_committed_fixture() {
    let dir = scratch("fixture");
    let out = dir.join("tiny.gguf");
    convert_fixture(OutType::F32, &out);
    let ours = GgufFile::open(&out).unwrap();
    let fixture = GgufFile::open(fixtures().join("tiny-f32.gguf")).unwrap();

    assert_eq!(ours.tensors().len(), fixture.tensors().len());
    for expected in fixture.tensors() {
        let got = ours.tensor(&expected.name).unwrap();
        assert_eq!(got.dims, expected.dims, "{}", expected.name);
        assert_eq!(got.ggml_type, expected.ggml_type, "{}", expected.name);
        let (a, b) = (ours.tensor_data(got), fixture.tensor_data(expected));
        if expected.name.ends_with(".ssm_a") {
            assert!(
                within_one_ulp(&f32_bits(a), &f32_bits(b)),
                "{}",
                expected.name
            );
        } else {
            assert!(a == b, "tensor {} differs", expected.name);
        }
    }
    for (key, value) in fixture.metadata() {
        if key == "general.name" {
            continue;
        }
        assert_eq!(ours.get(key), Some(value), "metadata {key}");
    }
    let extra: Vec<&str> = ours
        .metadata()
        .map(|(key, _)| key)
        .filter(|key| fixture.get(key).is_none())
        .collect();
    assert_eq!(
        extra,
        [
            "general.type",
            "general.size_label",
            "qwen35.attention.recurrent_layers"
        ]
    );
    std::fs::remove_dir_all(dir).unwrap();
}
