//! The CPU engine on small synthetic qwen35 models built in memory: prefill/decode consistency,
//! snapshots, context limits, and load errors that name what is wrong.

use std::sync::Arc;

use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, Engine, ModelError, SkipLayers};
use qwen35::quant::{self, GgmlType};

/// A deterministic pseudo-random stream (xorshift), so every run builds the same model.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    fn values(&mut self, n: usize, center: f32, spread: f32) -> Vec<f32> {
        (0..n).map(|_| center + spread * self.uniform()).collect()
    }
}

enum Meta {
    U32(u32),
    F32(f32),
    Str(&'static str),
    Bools(Vec<bool>),
}

struct Tensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    values: Vec<f32>,
}

/// A qwen35 model description that tests edit before serializing it to GGUF bytes.
struct Synth {
    meta: Vec<(String, Meta)>,
    tensors: Vec<Tensor>,
}

const EMBD: usize = 64;
const FF: usize = 96;
const VOCAB: usize = 40;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 16;
const ROPE_DIMS: usize = 8;
const K_HEADS: usize = 2;
const V_HEADS: usize = 4;
const SSM_DIM: usize = 8;
const CONV: usize = 4;
const LAYERS: usize = 4;

impl Synth {
    /// Four layers (attention at layer 3 by the default interval), matrices of type `matrix_ty`.
    fn new(matrix_ty: GgmlType) -> Synth {
        let key = |k: &str| format!("qwen35.{k}");
        let meta = vec![
            ("general.architecture".into(), Meta::Str("qwen35")),
            (key("block_count"), Meta::U32(LAYERS as u32)),
            (key("context_length"), Meta::U32(256)),
            (key("embedding_length"), Meta::U32(EMBD as u32)),
            (key("feed_forward_length"), Meta::U32(FF as u32)),
            (key("attention.head_count"), Meta::U32(HEADS as u32)),
            (key("attention.head_count_kv"), Meta::U32(KV_HEADS as u32)),
            (key("attention.key_length"), Meta::U32(HEAD_DIM as u32)),
            (key("attention.value_length"), Meta::U32(HEAD_DIM as u32)),
            (key("attention.layer_norm_rms_epsilon"), Meta::F32(1e-6)),
            (key("rope.freq_base"), Meta::F32(10000.0)),
            (key("rope.dimension_count"), Meta::U32(ROPE_DIMS as u32)),
            (key("ssm.conv_kernel"), Meta::U32(CONV as u32)),
            (key("ssm.inner_size"), Meta::U32((V_HEADS * SSM_DIM) as u32)),
            (key("ssm.state_size"), Meta::U32(SSM_DIM as u32)),
            (key("ssm.time_step_rank"), Meta::U32(V_HEADS as u32)),
            (key("ssm.group_count"), Meta::U32(K_HEADS as u32)),
        ];
        let mut synth = Synth {
            meta,
            tensors: Vec::new(),
        };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut add = |name: String, dims: &[usize], ty: GgmlType, center: f32, spread: f32| {
            let n = dims.iter().product();
            synth.tensors.push(Tensor {
                name,
                dims: dims.iter().map(|&d| d as u64).collect(),
                ty,
                values: rng.values(n, center, spread),
            });
        };
        let f32 = GgmlType::F32;
        let m = matrix_ty;
        add("token_embd.weight".into(), &[EMBD, VOCAB], m, 0.0, 1.0);
        add("output_norm.weight".into(), &[EMBD], f32, 1.0, 0.2);
        add("output.weight".into(), &[EMBD, VOCAB], m, 0.0, 0.3);
        let (key_w, value_w) = (K_HEADS * SSM_DIM, V_HEADS * SSM_DIM);
        for i in 0..LAYERS {
            let b = |s: &str| format!("blk.{i}.{s}");
            let matrix_scale = 0.5 / (EMBD as f32).sqrt();
            add(b("attn_norm.weight"), &[EMBD], f32, 1.0, 0.2);
            add(b("post_attention_norm.weight"), &[EMBD], f32, 1.0, 0.2);
            add(
                b("ffn_gate.weight"),
                &[EMBD, FF],
                m,
                0.0,
                2.0 * matrix_scale,
            );
            add(b("ffn_up.weight"), &[EMBD, FF], m, 0.0, 2.0 * matrix_scale);
            add(b("ffn_down.weight"), &[FF, EMBD], m, 0.0, matrix_scale);
            if i == 3 {
                add(
                    b("attn_q.weight"),
                    &[EMBD, 2 * HEADS * HEAD_DIM],
                    m,
                    0.0,
                    4.0 * matrix_scale,
                );
                add(
                    b("attn_k.weight"),
                    &[EMBD, KV_HEADS * HEAD_DIM],
                    m,
                    0.0,
                    4.0 * matrix_scale,
                );
                add(
                    b("attn_v.weight"),
                    &[EMBD, KV_HEADS * HEAD_DIM],
                    m,
                    0.0,
                    2.0 * matrix_scale,
                );
                add(b("attn_q_norm.weight"), &[HEAD_DIM], f32, 1.0, 0.2);
                add(b("attn_k_norm.weight"), &[HEAD_DIM], f32, 1.0, 0.2);
                add(
                    b("attn_output.weight"),
                    &[HEADS * HEAD_DIM, EMBD],
                    m,
                    0.0,
                    matrix_scale,
                );
            } else {
                let conv_ch = 2 * key_w + value_w;
                add(
                    b("attn_qkv.weight"),
                    &[EMBD, conv_ch],
                    m,
                    0.0,
                    4.0 * matrix_scale,
                );
                add(
                    b("attn_gate.weight"),
                    &[EMBD, value_w],
                    m,
                    0.0,
                    2.0 * matrix_scale,
                );
                add(
                    b("ssm_beta.weight"),
                    &[EMBD, V_HEADS],
                    m,
                    0.0,
                    2.0 * matrix_scale,
                );
                add(
                    b("ssm_alpha.weight"),
                    &[EMBD, V_HEADS],
                    m,
                    0.0,
                    2.0 * matrix_scale,
                );
                add(b("ssm_conv1d.weight"), &[CONV, conv_ch], f32, 0.0, 0.6);
                add(b("ssm_dt.bias"), &[V_HEADS], f32, 0.5, 0.5);
                add(b("ssm_a"), &[V_HEADS], f32, -0.5, 0.4);
                add(b("ssm_norm.weight"), &[SSM_DIM], f32, 1.0, 0.2);
                add(b("ssm_out.weight"), &[value_w, EMBD], m, 0.0, matrix_scale);
            }
        }
        synth
    }

    fn set(&mut self, key: &str, value: Meta) -> &mut Synth {
        self.meta.retain(|(k, _)| k != key);
        self.meta.push((key.into(), value));
        self
    }

    fn tensor(&mut self, name: &str) -> &mut Tensor {
        self.tensors
            .iter_mut()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tensor {name}"))
    }

    fn remove(&mut self, name: &str) -> &mut Synth {
        self.tensors.retain(|t| t.name != name);
        self
    }

    /// The model as a GGUF v3 file.
    fn bytes(&self) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        }
        fn pad(out: &mut Vec<u8>) {
            out.resize(out.len().div_ceil(32) * 32, 0);
        }
        let mut data = Vec::new();
        let mut infos = Vec::new();
        for t in &self.tensors {
            pad(&mut data);
            string(&mut infos, &t.name);
            infos.extend((t.dims.len() as u32).to_le_bytes());
            t.dims.iter().for_each(|d| infos.extend(d.to_le_bytes()));
            infos.extend(t.ty.id().to_le_bytes());
            infos.extend((data.len() as u64).to_le_bytes());
            for row in t.values.chunks(t.dims[0] as usize) {
                quant::quantize_row(t.ty, row, &mut data).unwrap();
            }
        }
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.meta.len() as u64).to_le_bytes());
        for (key, value) in &self.meta {
            string(&mut out, key);
            match value {
                Meta::U32(v) => {
                    out.extend(4u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::F32(v) => {
                    out.extend(6u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::Str(s) => {
                    out.extend(8u32.to_le_bytes());
                    string(&mut out, s);
                }
                Meta::Bools(v) => {
                    out.extend(9u32.to_le_bytes());
                    out.extend(7u32.to_le_bytes());
                    out.extend((v.len() as u64).to_le_bytes());
                    out.extend(v.iter().map(|&b| b as u8));
                }
            }
        }
        out.extend(infos);
        pad(&mut out);
        out.extend(data);
        out
    }

    fn engine(&self, ctx: usize) -> Result<Box<dyn Engine>, ModelError> {
        let file = GgufFile::from_bytes(self.bytes()).expect("synthetic GGUF parses");
        load_engine(Arc::new(file), BackendKind::Cpu, 2, ctx)
    }
}

fn engine(ty: GgmlType) -> Box<dyn Engine> {
    Synth::new(ty).engine(64).expect("synthetic model loads")
}

const PROMPT: [u32; 12] = [3, 17, 5, 39, 0, 22, 8, 8, 31, 12, 26, 1];

/// max |a − b| relative to max |b|.
fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best }) as u32
}

#[test]
fn prefill_then_decode_equals_longer_prefill() {
    for ty in [GgmlType::F32, GgmlType::Q8_0] {
        let n = PROMPT.len() - 1;
        let mut stepped = engine(ty);
        stepped.eval(&PROMPT[..n], false).unwrap();
        let decoded = stepped.eval(&PROMPT[n..], false).unwrap();
        assert_eq!(stepped.position(), PROMPT.len());

        let mut whole = engine(ty);
        let all = whole.eval(&PROMPT, true).unwrap();
        assert_eq!(all.len(), PROMPT.len() * VOCAB);
        let last = &all[n * VOCAB..];
        let d = rel_diff(&decoded, last);
        assert!(d < 1e-5, "{ty:?}: decode vs prefill differ by {d}");
        // The positions must differ, or this test could not see a position bug.
        assert!(rel_diff(&all[..VOCAB], last) > 1e-2);
    }
}

#[test]
fn token_by_token_equals_one_shot_prefill_at_every_position() {
    for ty in [GgmlType::F32, GgmlType::Q8_0] {
        let all = engine(ty).eval(&PROMPT, true).unwrap();
        let mut stepped = engine(ty);
        for (t, &token) in PROMPT.iter().enumerate() {
            let logits = stepped.eval(&[token], false).unwrap();
            let d = rel_diff(&logits, &all[t * VOCAB..(t + 1) * VOCAB]);
            assert!(d < 1e-5, "{ty:?} position {t}: differ by {d}");
        }
    }
}

#[test]
fn snapshot_restore_replays_bit_identically() {
    let mut e = engine(GgmlType::Q8_0);
    let first = e.eval(&PROMPT[..5], false).unwrap();
    let snap = e.snapshot().unwrap();
    assert_eq!(snap.position(), 5);
    let generate = |e: &mut Box<dyn Engine>| {
        let mut logits = first.clone();
        let mut out = Vec::new();
        for _ in 0..6 {
            logits = e.eval(&[argmax(&logits)], false).unwrap();
            out.push(logits.clone());
        }
        out
    };
    let a = generate(&mut e);
    assert_eq!(e.position(), 11);
    e.restore(&snap).unwrap();
    assert_eq!(e.position(), 5);
    let b = generate(&mut e);
    assert_eq!(a, b);

    // reset then replaying the prompt reaches the same state as the snapshot.
    e.reset();
    assert_eq!(e.position(), 0);
    assert_eq!(e.eval(&PROMPT[..5], false).unwrap(), first);
    assert_eq!(e.snapshot().unwrap(), snap);
}

/// `bench --skip` leaves out one kind of layer's token mixing, or both (the logits differ, each
/// way differently), and puts it back: the logits are then bit-identical to the model's.
#[test]
fn skipped_layers_change_the_logits_and_come_back_in_place() {
    let mut e = engine(GgmlType::F32);
    let prompt = [1, 5, 9, 2, 7];
    let logits = |e: &mut Box<dyn Engine>, skip: SkipLayers| {
        e.set_skip(skip);
        e.reset();
        e.eval(&prompt, false).unwrap()
    };
    let full = logits(&mut e, SkipLayers::None);
    let no_delta_net = logits(&mut e, SkipLayers::DeltaNet);
    let no_attention = logits(&mut e, SkipLayers::Attention);
    let neither = logits(&mut e, SkipLayers::Both);
    let all = [&full, &no_delta_net, &no_attention, &neither];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert!(rel_diff(a, b) > 1e-3);
        }
    }
    assert_eq!(logits(&mut e, SkipLayers::DeltaNet), no_delta_net);
    assert_eq!(logits(&mut e, SkipLayers::None), full);
}

#[test]
fn context_full_leaves_state_untouched() {
    let mut e = Synth::new(GgmlType::F32).engine(8).unwrap();
    assert_eq!(e.context_len(), 8);
    e.eval(&PROMPT[..6], false).unwrap();
    let before = e.snapshot().unwrap();
    match e.eval(&PROMPT[6..9], false) {
        Err(ModelError::ContextFull { needed: 9, ctx: 8 }) => {}
        other => panic!("expected ContextFull, got {other:?}"),
    }
    assert_eq!(e.position(), 6);
    assert_eq!(e.snapshot().unwrap(), before);
    let fits = e.eval(&PROMPT[6..8], false).unwrap();
    let reference = engine(GgmlType::F32).eval(&PROMPT[..8], false).unwrap();
    assert!(rel_diff(&fits, &reference) < 1e-5);
    assert!(matches!(
        e.eval(&[0], false),
        Err(ModelError::ContextFull { needed: 9, ctx: 8 })
    ));
}

#[test]
fn bad_tokens_and_backends_are_errors() {
    let mut e = engine(GgmlType::F32);
    assert!(matches!(
        e.eval(&[1, VOCAB as u32], false),
        Err(ModelError::TokenOutOfRange { token, vocab: VOCAB }) if token == VOCAB as u32
    ));
    assert!(matches!(e.eval(&[], false), Err(ModelError::EmptyInput)));
    assert_eq!(e.position(), 0);
    let file = Arc::new(GgufFile::from_bytes(Synth::new(GgmlType::F32).bytes()).unwrap());
    // Off Apple hardware the Metal backend is a clear error, not a silent fallback.
    if !cfg!(target_os = "macos") {
        let err = load_engine(Arc::clone(&file), BackendKind::Metal, 1, 16)
            .err()
            .unwrap();
        assert!(
            matches!(err, ModelError::BackendUnavailable { .. }),
            "{err}"
        );
    }
    assert!("cuda".parse::<BackendKind>().is_err());
}

/// Loads the edited model and returns the error message.
fn load_error(edit: impl FnOnce(&mut Synth)) -> String {
    let mut synth = Synth::new(GgmlType::F32);
    edit(&mut synth);
    match synth.engine(16) {
        Ok(_) => panic!("model loaded despite the edit"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn load_errors_name_the_problem() {
    let missing = load_error(|s| {
        s.remove("blk.3.attn_k.weight");
    });
    assert!(missing.contains("blk.3.attn_k.weight"), "{missing}");

    let shape = load_error(|s| {
        s.tensor("blk.1.ssm_out.weight").dims = vec![EMBD as u64, (V_HEADS * SSM_DIM) as u64];
    });
    assert!(
        shape.contains("blk.1.ssm_out.weight") && shape.contains("[32, 64]"),
        "{shape}"
    );

    let arch = load_error(|s| {
        s.set("general.architecture", Meta::Str("qwen3next"));
    });
    assert!(arch.contains("qwen3next"), "{arch}");

    let schedule = load_error(|s| {
        s.set(
            "qwen35.attention.recurrent_layers",
            Meta::Bools(vec![true, false]),
        );
    });
    assert!(
        schedule.contains("attention.recurrent_layers"),
        "{schedule}"
    );

    let interval = load_error(|s| {
        s.set("qwen35.full_attention_interval", Meta::U32(0));
    });
    assert!(interval.contains("full_attention_interval"), "{interval}");

    let heads = load_error(|s| {
        s.set("qwen35.attention.head_count_kv", Meta::U32(3));
    });
    assert!(heads.contains("head_count_kv"), "{heads}");

    let missing_key = load_error(|s| {
        s.meta.retain(|(k, _)| k != "qwen35.ssm.state_size");
    });
    assert!(missing_key.contains("ssm.state_size"), "{missing_key}");
}

#[test]
fn recurrent_layers_array_sets_the_schedule() {
    // Layer 3 attention by flags instead of the interval: same model, same logits.
    let by_interval = engine(GgmlType::F32).eval(&PROMPT, false).unwrap();
    let mut synth = Synth::new(GgmlType::F32);
    synth.set(
        "qwen35.attention.recurrent_layers",
        Meta::Bools(vec![true, true, true, false]),
    );
    let by_flags = synth.engine(16).unwrap().eval(&PROMPT, false).unwrap();
    assert_eq!(by_interval, by_flags);
    // Flags that contradict the tensors are a load error naming the missing tensor.
    let wrong = load_error(|s| {
        s.set(
            "qwen35.attention.recurrent_layers",
            Meta::Bools(vec![true, true, false, true]),
        );
    });
    assert!(wrong.contains("blk.2.attn_q.weight"), "{wrong}");
}

#[test]
fn mtp_blocks_are_not_part_of_the_main_stack() {
    let reference = engine(GgmlType::F32).eval(&PROMPT, false).unwrap();
    // block_count 5 with one MTP block: the fifth block's tensors are never needed.
    let mut synth = Synth::new(GgmlType::F32);
    synth
        .set("qwen35.block_count", Meta::U32(5))
        .set("qwen35.nextn_predict_layers", Meta::U32(1));
    let logits = synth.engine(16).unwrap().eval(&PROMPT, false).unwrap();
    assert_eq!(logits, reference);
    assert_eq!(synth.engine(16).unwrap().config().n_layers(), LAYERS);
}

#[test]
fn tied_output_falls_back_to_token_embd() {
    let mut tied = Synth::new(GgmlType::F32);
    tied.remove("output.weight");
    let tied = tied.engine(16).unwrap().eval(&PROMPT, false).unwrap();
    // The same model with an explicit output.weight equal to token_embd.
    let mut explicit = Synth::new(GgmlType::F32);
    explicit.tensor("output.weight").values = explicit.tensor("token_embd.weight").values.clone();
    let explicit = explicit.engine(16).unwrap().eval(&PROMPT, false).unwrap();
    assert_eq!(tied, explicit);
    let untied = engine(GgmlType::F32).eval(&PROMPT, false).unwrap();
    assert!(rel_diff(&tied, &untied) > 1e-2);
}

#[test]
fn absurd_sizes_are_errors_not_panics() {
    let huge = load_error(|s| {
        s.set("qwen35.ssm.group_count", Meta::U32(u32::MAX));
    });
    assert!(huge.contains("ssm.group_count"), "{huge}");
    match Synth::new(GgmlType::F32).engine(usize::MAX / 2) {
        Err(ModelError::ContextTooLarge { .. }) => {}
        other => panic!("expected ContextTooLarge, got {:?}", other.err()),
    }
}
