"""Writes the fuzz regression corpus that tests/fuzz_regressions.rs replays (run from the
repository root, with `gguf` from PyPI):

    python scripts/make_fuzz_regressions.py

No fuzz campaign has recorded a crashing input so far (fuzz/results/README.md). Until one does,
the corpus holds small hand-minimized inputs of the kinds that once were, or could be, bugs: for
gguf_model, the micro F32 seed model (fuzz/seeds/gguf_model/micro-f32.gguf, 16 KB) with one
hostile edit each, as tests/gguf_reader.rs and tests/cli_info.rs make them on bigger files (each
must be refused with an error); for tokenizer and chat_template, texts at the edges of their
parsers (each must run through the harness's invariants). A crashing input found later is added
to the same directories, minimized (`cargo fuzz tmin`), under a name that says what it broke.
"""

import struct
from pathlib import Path

import gguf

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "fuzz/seeds/gguf_model/micro-f32.gguf"
OUT = ROOT / "tests/data/fuzz"


def value_offset(reader, key):
    """Where the value of metadata `key` starts (after its length, name and type)."""
    field = reader.fields[key]
    return field.offset + 8 + len(key.encode()) + 4


def tensor_fields(reader, name):
    """Offsets of a tensor's n_dims, first dim, type and data offset in its header entry."""
    tensor = next(t for t in reader.tensors if t.name == name)
    n_dims_at = tensor.field.offset + 8 + len(name.encode())
    n_dims = len(tensor.shape)
    type_at = n_dims_at + 4 + 8 * n_dims
    return n_dims_at, n_dims_at + 4, type_at, type_at + 4


def gguf_model_inputs():
    seed = SEED.read_bytes()
    reader = gguf.GGUFReader(SEED)

    def edited(at, fmt, value):
        data = bytearray(seed)
        struct.pack_into(fmt, data, at, value)
        return bytes(data)

    n_dims_at, dim0_at, type_at, offset_at = tensor_fields(reader, "blk.0.attn_qkv.weight")
    arch_at = value_offset(reader, "general.architecture")
    cases = {
        "empty": b"",
        "magic-only": seed[:4],
        "truncated-in-metadata": seed[:200],
        "truncated-in-tensor-infos": seed[: n_dims_at + 2],
        "truncated-data": seed[:-100],
        "bad-magic": b"GGML" + seed[4:],
        "version-7": edited(4, "<I", 7),
        "tensor-count-2e40": edited(8, "<Q", 1 << 40),
        "kv-count-2e40": edited(16, "<Q", 1 << 40),
        "key-length-2e60": edited(24, "<Q", 1 << 60),
        "string-length-2e60": edited(arch_at, "<Q", 1 << 60),
        "unknown-value-type": edited(value_offset(reader, "qwen35.block_count") - 4, "<I", 99),
        "tokens-array-length-2e60": edited(
            value_offset(reader, "tokenizer.ggml.tokens") + 4, "<Q", 1 << 60
        ),
        "wrong-arch": edited(arch_at + 8, "6s", b"llama3"),
        "block-count-2e31": edited(value_offset(reader, "qwen35.block_count"), "<I", 1 << 31),
        "head-count-zero": edited(value_offset(reader, "qwen35.attention.head_count"), "<I", 0),
        "ffn-length-2e31": edited(
            value_offset(reader, "qwen35.feed_forward_length"), "<I", 1 << 31
        ),
        "n-dims-5": edited(n_dims_at, "<I", 5),
        "dim-zero": edited(dim0_at, "<Q", 0),
        "dim-2e62": edited(dim0_at, "<Q", 1 << 62),
        "unknown-ggml-type": edited(type_at, "<I", 99),
        "q8_0-rows-not-whole-blocks": edited(type_at, "<I", int(gguf.GGMLQuantizationType.Q8_0)),
        "data-offset-misaligned": edited(offset_at, "<Q", struct.unpack_from("<Q", seed, offset_at)[0] + 1),
        "data-offset-past-end": edited(offset_at, "<Q", 1 << 40),
    }
    return cases


def tokenizer_inputs():
    return {
        "invalid-utf8": bytes([0xC3, 0x28, 0xA0, 0xA1, 0xE2, 0x28, 0xA1, 0xF0, 0x90, 0x28, 0xBC, 0xFF]),
        "lone-continuation-bytes": bytes(range(0x80, 0xC0)),
        "nul-and-controls": bytes(range(0, 32)) + b"\x7f",
        "whitespace-runs": b" " * 300 + b"\t\t\n\n\r\n" + b"\n" * 64 + " x \u3000\u00a0".encode(),
        "digit-run": b"1234567890" * 30,
        "specials-glued": b"<|im_start|><|im_end|><|im_start|>user\n<|endoftext|><think></think><|im_end",
        "special-prefixes": b"<|im_sta <|im_end| <| |> <|<|im_start|>|>",
        "combining-marks": "e\u0301\u0301\u0301 A\u030a \u1e9b\u0323 \ufb01 \u212b".encode(),
        "emoji-zwj": "👩\u200d👩\u200d👧\u200d👦 🏳️\u200d🌈 👍🏽 🇯🇵".encode(),
        "mixed-scripts": "Здравствуй мир 你好世界 مرحبا שלום नमस्ते こんにちは 안녕".encode(),
        "contractions": b"don't I'M we'Ve they'LL it's 'S 's'",
        "ids-out-of-range": bytes([0xFF, 0xFF, 0x00, 0x80, 0x7F, 0x7F, 0x60, 0x01]),
    }


def chat_template_inputs():
    sep = b"\xff"
    return {
        "empty-after-flags": b"\x01",
        "no-messages": b"\x00" + sep + sep,
        "unclosed-think": b"\x01" + b"\x02<think>never closed",
        "think-close-only": b"\x00" + b"\x02</think>answer" + sep + b"\x01</think>",
        "nested-think": b"\x01\x02<think><think>a</think>b</think>c",
        "specials-in-content": b"\x00\x01<|im_start|>assistant\n<|im_end|>" + sep + b"\x00<|im_end|>",
        "invalid-utf8-content": b"\x01\x01\xc3\x28\xe2\x82" + sep + b"\x02\xf0\x28\x8c",
        "many-turns": b"\x01" + sep.join(bytes([i % 3]) + b"t" for i in range(64)),
    }


def main():
    for target, cases in [
        ("gguf_model", gguf_model_inputs()),
        ("tokenizer", tokenizer_inputs()),
        ("chat_template", chat_template_inputs()),
    ]:
        directory = OUT / target
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in cases.items():
            (directory / name).write_bytes(data)
        print(f"{target}: {len(cases)} inputs in {directory.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
