//! Malformed and hostile GGUF files through `qwen35 info`: each must exit non-zero with a message
//! naming the problem, and none may panic.

use qwen35::gguf::{GgufFile, GgufWriter, MetaArray, MetaValue};
use qwen35::quant::{row_bytes, GgmlType};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-q8_0.gguf")
}

/// A GGUF as editable parts: metadata in file order and tensors with their bytes.
struct Parts {
    kvs: Vec<(String, MetaValue)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl Parts {
    fn of_fixture() -> Parts {
        let file = GgufFile::open(fixture()).unwrap();
        Parts {
            kvs: file
                .metadata()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            tensors: file
                .tensors()
                .iter()
                .map(|t| {
                    let bytes = file.tensor_data(t).to_vec();
                    (t.name.clone(), t.dims.clone(), t.ggml_type, bytes)
                })
                .collect(),
        }
    }

    fn set(&mut self, key: &str, value: MetaValue) -> &mut Parts {
        match self.kvs.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = value,
            None => self.kvs.push((key.to_string(), value)),
        }
        self
    }

    fn remove_key(&mut self, key: &str) -> &mut Parts {
        self.kvs.retain(|(k, _)| k != key);
        self
    }

    fn remove_tensor(&mut self, name: &str) -> &mut Parts {
        self.tensors.retain(|t| t.0 != name);
        self
    }

    /// Gives tensor `name` new dims and type, with zero data of the matching size.
    fn retype(&mut self, name: &str, dims: &[u64], ty: GgmlType) -> &mut Parts {
        let t = self.tensors.iter_mut().find(|t| t.0 == name).unwrap();
        let rows: u64 = dims[1..].iter().product();
        let bytes = row_bytes(ty, dims[0]).unwrap() * rows;
        *t = (name.to_string(), dims.to_vec(), ty, vec![0; bytes as usize]);
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut writer = GgufWriter::new();
        for (k, v) in &self.kvs {
            writer.add_kv(k, v.clone()).unwrap();
        }
        for (name, dims, ty, _) in &self.tensors {
            writer.add_tensor(name, dims, *ty).unwrap();
        }
        let mut data = writer.write_header(Vec::new()).unwrap();
        for (name, _, _, bytes) in &self.tensors {
            data.write_tensor(name, bytes).unwrap();
        }
        data.finish().unwrap()
    }
}

/// Runs `qwen35 info` on `bytes` and returns its stderr, asserting failure without a panic.
fn info_fails(case: &str, bytes: &[u8]) -> String {
    let path =
        std::env::temp_dir().join(format!("qwen35-hostile-{}-{case}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args(["info", "-m"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{case}: info accepted the file");
    assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
    assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    stderr
}

fn assert_names(case: &str, stderr: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{case}: message does not name {needle:?}: {stderr}"
        );
    }
}

#[test]
fn the_fixture_itself_passes() {
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args(["info", "-m"])
        .arg(fixture())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("3 Gated DeltaNet, 1 gated full attention"),
        "{stdout}"
    );
}

#[test]
fn container_damage_is_named() {
    let good = std::fs::read(fixture()).unwrap();

    let e = info_fails("truncated-header", &good[..200]);
    assert_names("truncated-header", &e, &["offset"]);

    // Cut inside the data of the tensor stored last: the message must name that tensor.
    let file = GgufFile::open(fixture()).unwrap();
    let last = file.tensors().iter().max_by_key(|t| t.offset).unwrap();
    let cut = (last.offset + last.n_bytes / 2) as usize;
    let e = info_fails("truncated-data", &good[..cut]);
    assert_names("truncated-data", &e, &[&last.name]);

    let mut bad_magic = good.clone();
    bad_magic[..4].copy_from_slice(b"GGML");
    let e = info_fails("bad-magic", &bad_magic);
    // Hex with its prefix: "47 47 4d 4c" would read as decimal.
    assert_names("bad-magic", &e, &["not a GGUF file", "0x47 0x47 0x4d 0x4c"]);

    let mut version = good.clone();
    version[4..8].copy_from_slice(&7u32.to_le_bytes());
    let e = info_fails("version", &version);
    assert_names("version", &e, &["version", "7"]);

    let mut tensor_count = good.clone();
    tensor_count[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = info_fails("tensor-count", &tensor_count);
    assert_names("tensor-count", &e, &["tensor_count", "1099511627776"]);

    // The first key's length claims 2^60 bytes.
    let mut key_len = good.clone();
    key_len[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = info_fails("huge-string", &key_len);
    assert_names(
        "huge-string",
        &e,
        &["length of key", "offset 24", "1152921504606846976"],
    );

    let e = info_fails("empty", &[]);
    assert_names("empty", &e, &["truncated", "magic", "offset 0"]);
}

#[test]
fn model_damage_is_named() {
    type Case = (&'static str, Box<dyn Fn(&mut Parts)>, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "wrong-arch",
            Box::new(|p| {
                p.set("general.architecture", MetaValue::Str("llama".into()));
            }),
            vec!["llama"],
        ),
        (
            "missing-key",
            Box::new(|p| {
                p.remove_key("qwen35.embedding_length");
            }),
            vec!["qwen35.embedding_length"],
        ),
        (
            "key-wrong-type",
            Box::new(|p| {
                p.set("qwen35.block_count", MetaValue::Str("four".into()));
            }),
            vec!["qwen35.block_count"],
        ),
        (
            "absurd-size",
            Box::new(|p| {
                p.set("qwen35.feed_forward_length", MetaValue::U64(1 << 40));
            }),
            vec!["qwen35.feed_forward_length"],
        ),
        (
            "heads-not-dividing",
            Box::new(|p| {
                p.set("qwen35.attention.head_count_kv", MetaValue::U32(3));
            }),
            vec!["head_count_kv"],
        ),
        (
            "recurrent-layers-length",
            Box::new(|p| {
                p.set(
                    "qwen35.attention.recurrent_layers",
                    MetaValue::Array(MetaArray::Bool(vec![true, false])),
                );
            }),
            vec!["recurrent_layers"],
        ),
        (
            "missing-tensor",
            Box::new(|p| {
                p.remove_tensor("blk.1.ssm_a");
            }),
            vec!["blk.1.ssm_a"],
        ),
        (
            "mis-shaped-tensor",
            Box::new(|p| {
                p.retype("blk.0.attn_qkv.weight", &[256, 500], GgmlType::F32);
            }),
            vec!["blk.0.attn_qkv.weight"],
        ),
        (
            "unsupported-type",
            Box::new(|p| {
                p.retype("blk.2.ffn_up.weight", &[256, 512], GgmlType::Q2_K);
            }),
            vec!["blk.2.ffn_up.weight", "q2_K"],
        ),
        (
            "missing-tokenizer",
            Box::new(|p| {
                p.remove_key("tokenizer.ggml.tokens");
            }),
            vec!["tokenizer.ggml.tokens"],
        ),
        (
            "vocab-mismatch",
            Box::new(|p| {
                p.remove_tensor("output.weight");
                p.retype("token_embd.weight", &[256, 300], GgmlType::F32);
            }),
            vec!["300"],
        ),
    ];
    for (case, edit, needles) in cases {
        let mut parts = Parts::of_fixture();
        edit(&mut parts);
        let stderr = info_fails(case, &parts.bytes());
        assert_names(case, &stderr, &needles);
    }
}

#[test]
fn missing_file_is_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args(["info", "-m", "/nonexistent/model.gguf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("/nonexistent/model.gguf").count(),
        1,
        "the path once: {stderr}"
    );
    assert!(stderr.contains("No such file"), "{stderr}");
}

#[test]
fn a_directory_is_named_as_one() {
    let dir = std::env::temp_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args(["info", "-m"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is a directory"), "{stderr}");
    assert!(!stderr.contains("os error"), "{stderr}");
}
