//! `qwen35 convert` on the bundled fixture's Hugging Face checkpoint (`tests/fixtures/hf/`):
//! against llama.cpp b11434's converter output (digests in `tests/fixtures/hf-llama-cpp-b11434.json`,
//! made by `benches/results/convert-2026-12-04/digest_gguf.py`) and against the committed
//! `tiny-f32.gguf`, which is its output.

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

/// The committed `tiny-f32.gguf` is this conversion's output (scripts/make_fixture.py runs
/// `qwen35 convert` on `hf/`), byte for byte: a change to the converter shows here as well as in
/// the fixture's goldens, which were computed from those bytes.
#[test]
fn f32_conversion_is_the_committed_fixture() {
    let dir = scratch("fixture");
    let out = dir.join("tiny.gguf");
    convert_fixture(OutType::F32, &out);
    let ours = std::fs::read(&out).unwrap();
    let fixture = std::fs::read(fixtures().join("tiny-f32.gguf")).unwrap();
    assert!(
        ours == fixture,
        "tiny-f32.gguf is not `qwen35 convert tests/fixtures/hf --outtype f32`"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A copy of the fixture's checkpoint in a scratch directory, for spoiling.
fn checkpoint_copy(name: &str) -> PathBuf {
    let dir = scratch(name);
    let hf = dir.join("hf");
    std::fs::create_dir(&hf).unwrap();
    for entry in std::fs::read_dir(fixtures().join("hf")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), hf.join(entry.file_name())).unwrap();
    }
    hf
}

/// Rewrites the safetensors header of `path` through `edit` (the data stays as it was).
fn edit_header(path: &Path, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(header.as_object_mut().unwrap());
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend(&bytes[8 + n..]);
    std::fs::write(path, out).unwrap();
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

/// Converts `hf` and returns the error's full text; checks nothing was left in the output's
/// directory.
fn conversion_error(hf: &Path) -> String {
    let out_dir = hf.parent().unwrap().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("model.gguf");
    let error = convert(hf, &out, &options(OutType::F32), |_, _, _| {}).unwrap_err();
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "a failed conversion left {left:?}");
    let text = format!("{:#}", anyhow::Error::from(error));
    std::fs::remove_dir_all(hf.parent().unwrap()).unwrap();
    text
}

fn assert_mentions(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            text.contains(part),
            "error {text:?} does not mention {part:?}"
        );
    }
}

#[test]
fn a_header_length_past_the_file_is_refused() {
    let hf = checkpoint_copy("header-length");
    let path = hf.join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let past_the_end = (bytes.len() as u64).to_le_bytes();
    bytes[..8].copy_from_slice(&past_the_end);
    std::fs::write(&path, bytes).unwrap();
    let error = conversion_error(&hf);
    assert_mentions(
        &error,
        &["model.safetensors", "header length runs past the end"],
    );
}

#[test]
fn overlapping_offsets_are_refused() {
    let hf = checkpoint_copy("overlap");
    edit_header(&hf.join("model.safetensors"), |header| {
        let start = header["model.norm.weight"]["data_offsets"][0].clone();
        header["lm_head.weight"]["data_offsets"][0] = start;
    });
    let error = conversion_error(&hf);
    assert_mentions(&error, &["model.safetensors", "overlap"]);
}

#[test]
fn offsets_past_the_data_are_refused() {
    let hf = checkpoint_copy("out-of-range");
    edit_header(&hf.join("model.safetensors"), |header| {
        // The tensor stored last, moved past the end of the file.
        let last = header
            .iter()
            .filter(|(name, _)| *name != "__metadata__")
            .max_by_key(|(_, info)| info["data_offsets"][1].as_u64().unwrap())
            .map(|(name, _)| name.clone())
            .unwrap();
        let end = header[&last]["data_offsets"][1].as_u64().unwrap();
        let start = header[&last]["data_offsets"][0].as_u64().unwrap();
        header[&last]["data_offsets"] = serde_json::json!([start, end + 4096]);
        header[&last]["shape"] = serde_json::json!([(end + 4096 - start) / 4]);
    });
    let error = conversion_error(&hf);
    assert_mentions(
        &error,
        &["model.safetensors", "do not end at the end of the file"],
    );
}

#[test]
fn a_dtype_the_offsets_contradict_is_refused() {
    let hf = checkpoint_copy("dtype");
    edit_header(&hf.join("model.safetensors"), |header| {
        header["model.norm.weight"]["dtype"] = "F16".into();
    });
    let error = conversion_error(&hf);
    assert_mentions(
        &error,
        &["model.safetensors", "does not match its dtype and shape"],
    );
}

#[test]
fn a_shard_listed_in_the_index_but_missing_is_refused() {
    let hf = checkpoint_copy("missing-shard");
    let header_names: Vec<String> = {
        let bytes = std::fs::read(hf.join("model.safetensors")).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        header
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "__metadata__")
            .cloned()
            .collect()
    };
    let mut map = serde_json::Map::new();
    for name in header_names {
        map.insert(name, "model.safetensors".into());
    }
    map.insert(
        "model.norm.weight".into(),
        "model-00002-of-00002.safetensors".into(),
    );
    let index = serde_json::json!({"metadata": {}, "weight_map": map});
    std::fs::write(
        hf.join("model.safetensors.index.json"),
        serde_json::to_string(&index).unwrap(),
    )
    .unwrap();
    let error = conversion_error(&hf);
    assert_mentions(
        &error,
        &[
            "model.safetensors.index.json",
            "model-00002-of-00002.safetensors",
            "missing",
        ],
    );
}

#[test]
fn a_config_of_another_architecture_is_refused() {
    let hf = checkpoint_copy("architecture");
    edit_json(&hf.join("config.json"), |config| {
        config["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
    });
    let error = conversion_error(&hf);
    assert_mentions(
        &error,
        &["config.json", "LlamaForCausalLM", "not a Qwen3.5"],
    );
}

#[test]
fn shapes_that_disagree_with_the_config_are_refused() {
    let hf = checkpoint_copy("shape");
    edit_json(&hf.join("config.json"), |config| {
        config["intermediate_size"] = 384.into();
    });
    let error = conversion_error(&hf);
    assert_mentions(
        &error,
        &[
            "model.safetensors",
            "mlp.down_proj.weight",
            "[256, 512]",
            "[256, 384]",
            "config.json",
        ],
    );
}

#[test]
fn an_existing_output_is_kept_unless_forced() {
    let dir = scratch("exists");
    let out = dir.join("model.gguf");
    std::fs::write(&out, b"precious").unwrap();
    let error = convert(
        &fixtures().join("hf"),
        &out,
        &options(OutType::F32),
        |_, _, _| {},
    )
    .unwrap_err();
    assert_mentions(
        &error.to_string(),
        &["model.gguf", "already exists", "--force"],
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let forced = ConvertOptions {
        force: true,
        ..options(OutType::F32)
    };
    convert(&fixtures().join("hf"), &out, &forced, |_, _, _| {}).unwrap();
    assert!(GgufFile::open(&out).is_ok());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A failure after the output was started (here: the tokenizer, read after the header is planned)
/// leaves no partial file, and the pre-existing file it would have replaced stays.
#[test]
fn a_failure_midway_leaves_no_partial_output() {
    let hf = checkpoint_copy("midway");
    std::fs::write(
        hf.join("tokenizer.json"),
        b"{\"model\": {\"type\": \"Unigram\"}}",
    )
    .unwrap();
    let out_dir = hf.parent().unwrap().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("model.gguf");
    std::fs::write(&out, b"old").unwrap();
    let forced = ConvertOptions {
        force: true,
        ..options(OutType::F32)
    };
    let error = convert(&hf, &out, &forced, |_, _, _| {}).unwrap_err();
    assert_mentions(&error.to_string(), &["tokenizer.json", "not BPE"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 1);
    std::fs::remove_dir_all(hf.parent().unwrap()).unwrap();
}

/// The fixture rewritten as a multimodal checkpoint (`Qwen3_5ForConditionalGeneration`, text
/// under `model.language_model.`, a vision tensor) with one MTP layer (a copy of layer 3 plus
/// the MTP head's fc and norms) split over two shards with an index. The same shapes were
/// compared with llama.cpp's converter at 0.8B size (benches/results/convert-2026-12-04/).
fn multimodal_mtp_checkpoint(dir: &Path) {
    use safetensors::tensor::TensorView;
    let source = std::fs::read(fixtures().join("hf/model.safetensors")).unwrap();
    let source = safetensors::SafeTensors::deserialize(&source).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, view) in source.tensors() {
        let shape = view.shape().to_vec();
        let data = view.data().to_vec();
        if let Some(rest) = name.strip_prefix("model.layers.3.") {
            tensors.push((format!("mtp.layers.0.{rest}"), shape.clone(), data.clone()));
        }
        if name == "model.norm.weight" {
            for mtp in [
                "mtp.norm.weight",
                "mtp.pre_fc_norm_embedding.weight",
                "mtp.pre_fc_norm_hidden.weight",
            ] {
                tensors.push((mtp.into(), shape.clone(), data.clone()));
            }
        }
        let renamed = name.replacen("model.", "model.language_model.", 1);
        tensors.push((renamed, shape, data));
    }
    let fc: Vec<u8> = (0..256 * 512)
        .flat_map(|i| (i as f32 * 1e-4).to_le_bytes())
        .collect();
    tensors.push(("mtp.fc.weight".into(), vec![256, 512], fc));
    tensors.push((
        "model.visual.patch_embed.proj.weight".into(),
        vec![4, 4],
        vec![0; 64],
    ));
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let half = tensors.len() / 2;
    let mut weight_map = serde_json::Map::new();
    for (shard, part) in [
        ("model-00001-of-00002.safetensors", &tensors[..half]),
        ("model-00002-of-00002.safetensors", &tensors[half..]),
    ] {
        let views: Vec<(String, TensorView)> = part
            .iter()
            .map(|(name, shape, data)| {
                weight_map.insert(name.clone(), shard.into());
                (
                    name.clone(),
                    TensorView::new(safetensors::Dtype::F32, shape.clone(), data).unwrap(),
                )
            })
            .collect();
        safetensors::serialize_to_file(views, None, &dir.join(shard)).unwrap();
    }
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_string(&serde_json::json!({"metadata": {}, "weight_map": weight_map}))
            .unwrap(),
    )
    .unwrap();
    let mut text: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("hf/config.json")).unwrap())
            .unwrap();
    text["mtp_num_hidden_layers"] = 1.into();
    let config = serde_json::json!({
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": text,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixtures().join("hf").join(file), dir.join(file)).unwrap();
    }
}

#[test]
fn multimodal_checkpoints_keep_the_text_model_and_the_mtp_layer() {
    let dir = scratch("mtp");
    let hf = dir.join("hf");
    std::fs::create_dir(&hf).unwrap();
    multimodal_mtp_checkpoint(&hf);

    let with_mtp = dir.join("mtp.gguf");
    let summary = convert(&hf, &with_mtp, &options(OutType::F32), |_, _, _| {}).unwrap();
    assert_eq!((summary.n_mtp_layers, summary.skipped_vision), (1, 1));
    let file = GgufFile::open(&with_mtp).unwrap();
    assert_eq!(file.get_u32("qwen35.block_count").unwrap(), 5);
    assert_eq!(file.get_u32("qwen35.nextn_predict_layers").unwrap(), 1);
    let data = |name: &str| file.tensor_data(file.tensor(name).unwrap()).to_vec();
    assert_eq!(data("blk.4.attn_q.weight"), data("blk.3.attn_q.weight"));
    assert_eq!(data("blk.4.nextn.enorm.weight"), data("output_norm.weight"));
    assert_eq!(
        data("blk.4.nextn.shared_head_norm.weight"),
        data("output_norm.weight")
    );
    assert_eq!(
        file.tensor("blk.4.nextn.eh_proj.weight").unwrap().dims,
        [512, 256]
    );
    assert!(file.tensors().iter().all(|t| !t.name.contains("visual")));

    // Without the MTP layer it is the plain checkpoint's conversion, tensor for tensor.
    let without = dir.join("no-mtp.gguf");
    let opts = ConvertOptions {
        no_mtp: true,
        ..options(OutType::F32)
    };
    convert(&hf, &without, &opts, |_, _, _| {}).unwrap();
    let plain = dir.join("plain.gguf");
    convert_fixture(OutType::F32, &plain);
    let (without, plain) = (
        GgufFile::open(&without).unwrap(),
        GgufFile::open(&plain).unwrap(),
    );
    let names = |f: &GgufFile| {
        f.tensors()
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&without), names(&plain));
    for t in plain.tensors() {
        assert!(
            without.tensor_data(without.tensor(&t.name).unwrap()) == plain.tensor_data(t),
            "{}",
            t.name
        );
    }
    for (key, value) in plain.metadata() {
        if key != "general.name" {
            assert_eq!(without.get(key), Some(value), "{key}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}
