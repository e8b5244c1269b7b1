#!/usr/bin/env python3
"""Write the tiny fixture's Hugging Face checkpoint (the model `tests/fixtures/tiny-*.gguf` were
made from) into tests/fixtures/hf/: config.json, model.safetensors (float32), tokenizer.json and
tokenizer_config.json, as `save_pretrained` writes them. `qwen35 convert` turns it back into
tiny-f32.gguf; see tests/convert.rs.

    python scripts/make_hf_checkpoint.py [--out tests/fixtures/hf]

Same seed, same initialisation and same vocabulary as scripts/make_fixture.py; before writing,
the script checks that its tensors, converted the fixture's way, are exactly those of the
committed tiny-f32.gguf.
"""

import argparse
import json
from pathlib import Path

import gguf
import numpy as np
import torch

from fixture import convert, model, tokenizer
from make_fixture import SEED

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def tokenizer_config(vocab: tokenizer.TinyVocab) -> dict:
    """The fields llama.cpp's converter and HF read: specials, added tokens, the chat template."""
    added = {
        str(vocab.tokens.index(text)): {
            "content": text,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": is_control,
        }
        for text, is_control in tokenizer.ADDED_TOKENS
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "bos_token": None,
        "chat_template": tokenizer.CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": vocab.tokens[vocab.eos_id],
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": vocab.tokens[vocab.pad_id],
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def check_against_fixture(state: dict[str, np.ndarray], sizes: model.ModelSizes) -> None:
    reader = gguf.GGUFReader(FIXTURES / "tiny-f32.gguf")
    held = {t.name: np.asarray(t.data) for t in reader.tensors}
    converted = convert.hf_to_gguf(state, sizes)
    if [name for name, _ in converted] != [t.name for t in reader.tensors]:
        raise AssertionError("tensor names/order differ from tiny-f32.gguf")
    for name, array in converted:
        if not np.array_equal(held[name].reshape(array.shape), array):
            raise AssertionError(f"{name}: differs from tiny-f32.gguf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=FIXTURES / "hf")
    args = parser.parse_args()
    torch.set_num_threads(1)

    vocab = tokenizer.build_tiny_vocab()
    sizes = model.ModelSizes(vocab_size=len(vocab.tokens))
    config = model.hf_config(sizes, vocab.bos_id, vocab.eos_id, vocab.pad_id)
    config.architectures = ["Qwen3_5ForCausalLM"]
    hf = model.build_model(config)
    state = model.random_state_dict(hf, SEED, 256 + len(vocab.merges))
    check_against_fixture(state, sizes)
    model.load_state(hf, state)

    args.out.mkdir(parents=True, exist_ok=True)
    hf.config._attn_implementation = None
    hf.save_pretrained(args.out, safe_serialization=True)
    (args.out / "tokenizer.json").write_text(vocab.tokenizer.to_str(pretty=True) + "\n")
    (args.out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(vocab), indent=2) + "\n")
    for extra in ("generation_config.json",):
        (args.out / extra).unlink(missing_ok=True)
    print(f"wrote {args.out}: {sorted(p.name for p in args.out.iterdir())}")


if __name__ == "__main__":
    main()
