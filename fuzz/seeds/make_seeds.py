"""Writes the small seed corpora of the fuzz targets (run from the repository root):

    python3 fuzz/seeds/make_seeds.py

gguf_model: two micro qwen35 models that load (F32 with a 4-wide embedding; Q8_0 matrices with a
32-wide one), both carrying the fixture's 352-token vocabulary, the fixture's header and metadata
with the tensor data cut off, and gguf-py's reference file. tokenizer, chat_template: a few texts.
Output is deterministic (seeded numpy).
"""

from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/tiny-f32.gguf"
SEEDS = Path(__file__).resolve().parent
TOKENIZER_KEYS = [
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
]


def copy_tokenizer(reader, writer):
    for key in TOKENIZER_KEYS:
        field = reader.fields[key]
        value = field.contents()
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(key, value)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(key, value)
        else:
            writer.add_uint32(key, value)


def micro_model(path, d, quantize, rng):
    """Layer 0 Gated DeltaNet, layer 1 full attention; every width d, one head of each kind."""
    reader = gguf.GGUFReader(FIXTURE)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    writer = gguf.GGUFWriter(path, "qwen35")
    arch = "qwen35"
    for key, value in [
        ("block_count", 2), ("context_length", 16), ("embedding_length", d),
        ("feed_forward_length", d), ("attention.head_count", 1), ("attention.head_count_kv", 1),
        ("attention.key_length", d), ("attention.value_length", d),
        ("rope.dimension_count", 2), ("ssm.conv_kernel", 2), ("ssm.state_size", d),
        ("ssm.group_count", 1), ("ssm.time_step_rank", 1), ("ssm.inner_size", d),
        ("full_attention_interval", 2),
    ]:
        writer.add_uint32(f"{arch}.{key}", value)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_float32(f"{arch}.rope.freq_base", 1e7)
    copy_tokenizer(reader, writer)

    def matrix(name, rows, cols):
        values = rng.standard_normal((rows, cols)).astype(np.float32)
        if quantize:
            qtype = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, values)

    def dense(name, *shape):
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))

    channels = 3 * d
    matrix("token_embd.weight", vocab, d)
    dense("output_norm.weight", d)
    for i in range(2):
        blk = f"blk.{i}."
        if i == 0:
            matrix(blk + "attn_qkv.weight", channels, d)
            matrix(blk + "attn_gate.weight", d, d)
            matrix(blk + "ssm_beta.weight", 1, d)
            matrix(blk + "ssm_alpha.weight", 1, d)
            dense(blk + "ssm_conv1d.weight", channels, 2)
            dense(blk + "ssm_dt.bias", 1)
            dense(blk + "ssm_a", 1)
            dense(blk + "ssm_norm.weight", d)
            matrix(blk + "ssm_out.weight", d, d)
        else:
            matrix(blk + "attn_q.weight", 2 * d, d)
            matrix(blk + "attn_k.weight", d, d)
            matrix(blk + "attn_v.weight", d, d)
            dense(blk + "attn_q_norm.weight", d)
            dense(blk + "attn_k_norm.weight", d)
            matrix(blk + "attn_output.weight", d, d)
        dense(blk + "attn_norm.weight", d)
        dense(blk + "post_attention_norm.weight", d)
        matrix(blk + "ffn_gate.weight", d, d)
        matrix(blk + "ffn_up.weight", d, d)
        matrix(blk + "ffn_down.weight", d, d)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    rng = np.random.default_rng(35)
    model_dir = SEEDS / "gguf_model"
    model_dir.mkdir(exist_ok=True)
    micro_model(model_dir / "micro-f32.gguf", 4, False, rng)
    micro_model(model_dir / "micro-q8_0.gguf", 32, True, rng)
    data_start = min(t.data_offset for t in gguf.GGUFReader(FIXTURE).tensors)
    (model_dir / "fixture-header.gguf").write_bytes(FIXTURE.read_bytes()[:data_start])
    reference = ROOT / "tests/data/gguf/gguf_py_reference.gguf"
    (model_dir / "gguf_py_reference.gguf").write_bytes(reference.read_bytes())

    texts = {
        "plain": "The capital of France is Paris.",
        "specials": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "unicode": "café ñ 中文 🦀 e\u0301 \u00a0x\r\n\t  end",
        "digits": "3.14159 1234567 x2",
    }
    for target in ["tokenizer", "chat_template"]:
        (SEEDS / target).mkdir(exist_ok=True)
    for name, text in texts.items():
        (SEEDS / "tokenizer" / name).write_bytes(text.encode())
    chats = {
        # flags byte, then role byte + content per message, 0xFF between messages.
        "session": b"\x01\x00Be brief.\xff\x012+2?\xff\x02<think>\nadd\n</think>\n\n4\xff\x01and 3+3?",
        "open_reasoning": b"\x00\x02<think>\nstill thinking",
        "nested": b"\x01\x02a</think>b<think>c</think>\n\nd\xff\x01<|im_end|>",
    }
    for name, data in chats.items():
        (SEEDS / "chat_template" / name).write_bytes(data)


if __name__ == "__main__":
    main()
