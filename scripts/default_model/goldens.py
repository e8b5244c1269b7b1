#!/usr/bin/env python3
"""The default model's golden for `qwen35 check`: transformers' float32 logits on the weights the
bundled Q8_0 GGUF holds.

    python3 scripts/default_model/goldens.py [--gguf models/qwen35-default-q8_0.gguf] [--out tests/fixtures]

The float checkpoint is not in the repository, so the GGUF is the source: every tensor is
dequantized (gguf-py), mapped back to transformers' names and layout (the inverse of the
converter, scripts/fixture/convert.py), and loaded into transformers' own `Qwen3_5ForCausalLM`
with the sizes the GGUF's metadata gives (the MTP layer, blk.8, is left out: the engine does not
run it). The prompt is tokenized by a `tokenizers` BPE built from the GGUF's vocabulary and
merges, so no id comes from our engine. Writes
  default-q8_0.logits.npy   the prompt's logits [positions, vocab], token by token through the cache
  default-model.json        the prompt, its ids, the GGUF's path, the greedy continuation
Same packages as the fixture (tests/fixtures/README.md); deterministic (single-threaded torch).
"""

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path

import gguf
import numpy as np
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
from transformers import Qwen3_5ForCausalLM

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from fixture import convert, golden, gguf_file, model, tokenizer  # noqa: E402
from make_fixture import to_json  # noqa: E402

# Two ChatML turns as the model's training dialogues have them (every assistant turn with an
# empty think block), 51 tokens: the model answers with a WordNet definition, where its top-1 is clear at every step
# (story requests meet near-ties: names and adjectives drawn at random in training).
PROMPT_TEXT = (
    "<|im_start|>user\nHello!<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\nHello! How can I help you?<|im_end|>\n"
    "<|im_start|>user\nWhat is a dog?<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)
N_GREEDY = 32
# Greedy parity across backends must not hinge on near-ties (this model's logits reach |26|).
MIN_GREEDY_MARGIN = 0.1
MIN_PROMPT_MARGIN = 0.02


def field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def model_sizes(reader: gguf.GGUFReader, vocab_size: int) -> model.ModelSizes:
    """The sizes the GGUF's metadata gives, as the fixture's ModelSizes (whose partial rotary
    factor is fixed at 0.25: other rotary dims are an error)."""
    arch = field(reader, "general.architecture")
    layers = field(reader, f"{arch}.block_count") - field(reader, f"{arch}.nextn_predict_layers")
    sizes = model.ModelSizes(
        vocab_size=vocab_size,
        hidden_size=field(reader, f"{arch}.embedding_length"),
        intermediate_size=field(reader, f"{arch}.feed_forward_length"),
        num_hidden_layers=layers,
        full_attention_interval=field(reader, f"{arch}.full_attention_interval"),
        num_attention_heads=field(reader, f"{arch}.attention.head_count"),
        num_key_value_heads=field(reader, f"{arch}.attention.head_count_kv"),
        head_dim=field(reader, f"{arch}.attention.key_length"),
        rope_theta=field(reader, f"{arch}.rope.freq_base"),
        mrope_section=tuple(field(reader, f"{arch}.rope.dimension_sections")[:3]),
        rms_norm_eps=field(reader, f"{arch}.attention.layer_norm_rms_epsilon"),
        linear_conv_kernel_dim=field(reader, f"{arch}.ssm.conv_kernel"),
        linear_num_key_heads=field(reader, f"{arch}.ssm.group_count"),
        linear_key_head_dim=field(reader, f"{arch}.ssm.state_size"),
        linear_num_value_heads=field(reader, f"{arch}.ssm.time_step_rank"),
        linear_value_head_dim=field(reader, f"{arch}.ssm.inner_size") // field(reader, f"{arch}.ssm.time_step_rank"),
        tie_word_embeddings="output.weight" not in {t.name for t in reader.tensors},
    )
    if sizes.rotary_dims != field(reader, f"{arch}.rope.dimension_count"):
        raise ValueError("rotary dims do not match partial_rotary_factor 0.25")
    return sizes


def gguf_tokenizer(reader: gguf.GGUFReader) -> Tokenizer:
    """The GGUF's byte-level BPE as a `tokenizers` pipeline (NFC, the qwen35 split, its merges),
    with its CONTROL and USER_DEFINED tokens as added tokens."""
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in field(reader, "tokenizer.ggml.merges")]
    plain = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == tokenizer.TOKEN_TYPE_NORMAL}
    bpe = models.BPE(
        vocab=plain, merges=merges, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False, byte_fallback=False
    )
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = tokenizer.pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    added = [(t, k) for t, k in zip(tokens, types) if k in (tokenizer.TOKEN_TYPE_CONTROL, tokenizer.TOKEN_TYPE_USER_DEFINED)]
    tok.add_tokens([AddedToken(t, special=k == tokenizer.TOKEN_TYPE_CONTROL, normalized=False) for t, k in added])
    for text, _ in added:
        if tok.token_to_id(text) != tokens.index(text):
            raise ValueError(f"added token {text!r} got id {tok.token_to_id(text)}, wanted {tokens.index(text)}")
    return tok


def hf_model_from_gguf(path: Path) -> Qwen3_5ForCausalLM:
    """transformers' float32 `Qwen3_5ForCausalLM` (eager attention) on a GGUF's dequantized
    weights, with the sizes its metadata gives."""
    reader = gguf.GGUFReader(path)
    tensors = gguf_file.read_dequantized(path)
    sizes = model_sizes(reader, tensors["token_embd.weight"].shape[0])
    # As the training script: no special ids in the config (the forward pass does not read them).
    hf = model.build_model(model.hf_config(sizes, None, None, None))
    hf_shapes = {name: tuple(p.shape) for name, p in hf.named_parameters()}
    state = convert.gguf_to_hf(tensors, hf_shapes, sizes)
    if sizes.tie_word_embeddings:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state(hf, state)
    return hf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", type=Path, default=ROOT / "models/qwen35-default-q8_0.gguf")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fixtures")
    args = parser.parse_args()
    torch.set_num_threads(1)

    reader = gguf.GGUFReader(args.gguf)
    tok = gguf_tokenizer(reader)
    prompt_ids = tok.encode(PROMPT_TEXT).ids
    if tok.decode(prompt_ids, skip_special_tokens=False) != PROMPT_TEXT:
        raise AssertionError("the tokenizer does not round-trip the prompt")

    hf = hf_model_from_gguf(args.gguf)

    result = golden.run_golden(hf, prompt_ids, N_GREEDY)
    if not min(result.greedy_margins) >= MIN_GREEDY_MARGIN:
        raise AssertionError(f"greedy top-1 margin {min(result.greedy_margins)} < {MIN_GREEDY_MARGIN}")
    if not min(result.prompt_margins) >= MIN_PROMPT_MARGIN:
        raise AssertionError(f"prompt top-1 margin {min(result.prompt_margins)} < {MIN_PROMPT_MARGIN}")

    logits_name = "default-q8_0.logits.npy"
    np.save(args.out / logits_name, result.prompt_logits)
    record = {
        # Relative to the golden's folder, as golden.json's paths are.
        "gguf": os.path.relpath(args.gguf.resolve(), args.out.resolve()),
        "weights": "q8_0",
        "logits": logits_name,
        "reference": f"transformers {metadata.version('transformers')} Qwen3_5ForCausalLM, float32, "
        f"torch {torch.__version__}, on the GGUF's dequantized weights",
        "prompt_text": PROMPT_TEXT,
        "prompt_ids": prompt_ids,
        "greedy_ids": result.greedy_ids,
        "greedy_text": tok.decode(result.greedy_ids, skip_special_tokens=False),
        "min_greedy_margin": min(result.greedy_margins),
        "min_prompt_margin": min(result.prompt_margins),
        "max_abs_logit": float(np.abs(result.prompt_logits).max()),
        "whole_prompt_vs_stepwise_max_abs": result.full_vs_stepwise_max_abs,
    }
    (args.out / "default-model.json").write_text(to_json(record))
    print(to_json({k: v for k, v in record.items() if k != "prompt_text"}), end="")


if __name__ == "__main__":
    main()
