#!/usr/bin/env python3
"""Build the tiny qwen35 fixture: three GGUF variants of one random Qwen3.5 text model, the
HF-transformers goldens for each, and tokenizer test cases. See tests/fixtures/README.md.

    python3 scripts/make_fixture.py [--out tests/fixtures]

Deterministic: the same bytes on every run (seeded numpy init, single-threaded torch).
"""

import argparse
import json
import re
from pathlib import Path

import numpy as np
import torch

from fixture import convert, golden, gguf_file, model, numpy_reference, tokenizer

# Picked among seeds 0..47 for the largest smallest top-1 margin over all variants' greedy steps,
# so greedy parity does not hinge on near-ties; the script re-checks the margins below.
SEED = 18
N_GREEDY = 32
PROMPT_TEXT = (
    "<|im_start|>user\nWhat is the capital of France? Answer in 1 word.<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n"
)
TOKENIZER_CASE_TEXTS = [
    "Hello world! The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say We've done IT'S work, aren't they?",
    "12345 + 3.14 = 12348.14",
    "  two  spaces\n\n\nthree newlines\t\ttabs   \n end  ",
    "naïve café — 東京 🚀 ok",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello",
    "plain <think> is split out even without special parsing </think>",
]
MIN_SELF_CHECK_COSINE = 0.99999
MIN_GREEDY_MARGIN = 0.05
MIN_PROMPT_MARGIN = 0.02


def tokenizer_cases(vocab: tokenizer.TinyVocab) -> list[dict]:
    cases = []
    for text in TOKENIZER_CASE_TEXTS:
        ids = vocab.tokenizer.encode(text).ids
        if vocab.tokenizer.decode(ids, skip_special_tokens=False) != text:
            raise AssertionError(f"tokenizer does not round-trip {text!r}")
        cases.append({"text": text, "ids": ids})
    return cases


def check_golden_quality(variant: str, result: golden.Golden, n_plain_tokens: int) -> None:
    """Greedy parity must not hinge on near-ties, and must not meet an end-of-generation token."""
    if any(token >= n_plain_tokens for token in result.greedy_ids):
        raise AssertionError(f"{variant}: greedy output contains an added/padding token: {result.greedy_ids}")
    if not min(result.greedy_margins) >= MIN_GREEDY_MARGIN:
        raise AssertionError(f"{variant}: greedy top-1 margin {min(result.greedy_margins)} < {MIN_GREEDY_MARGIN}")
    if not min(result.prompt_margins) >= MIN_PROMPT_MARGIN:
        raise AssertionError(f"{variant}: prompt top-1 margin {min(result.prompt_margins)} < {MIN_PROMPT_MARGIN}")


def to_json(value) -> str:
    """Indented JSON with number lists kept on one line."""
    text = json.dumps(value, indent=1, ensure_ascii=False)
    return re.sub(r"\[\s*([-+.\deE,\s]+?)\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def check_f32_round_trip(written: list[tuple[str, np.ndarray]], read: dict[str, np.ndarray]) -> None:
    """The F32 file must hold exactly the converted tensors."""
    if set(read) != {name for name, _ in written}:
        raise AssertionError("tensor names in tiny-f32.gguf differ from the converted set")
    for name, array in written:
        if read[name].shape != array.shape or not np.array_equal(read[name], array):
            raise AssertionError(f"{name}: F32 GGUF read-back differs from what was written")


def numpy_self_check(f32_tensors: dict[str, np.ndarray], hf: torch.nn.Module, ids: list[int], sizes, hf_logits) -> dict:
    """The numpy GGUF-convention forward vs HF: layer-0 linear-attention output (forward hook)
    and the whole model's logits."""
    captured = {}
    hook = hf.model.layers[0].linear_attn.register_forward_hook(lambda _m, _i, out: captured.update(out=out))
    with torch.no_grad():
        hf(input_ids=torch.tensor([ids]), use_cache=False)
    hook.remove()
    hf_out = captured["out"][0].numpy()
    tiled = numpy_reference.cosine(numpy_reference.gdn_layer0_output(f32_tensors, ids, sizes, tiled=True), hf_out)
    grouped = numpy_reference.cosine(numpy_reference.gdn_layer0_output(f32_tensors, ids, sizes, tiled=False), hf_out)
    if not tiled >= MIN_SELF_CHECK_COSINE:
        raise AssertionError(f"GDN layer 0: numpy GGUF forward vs HF cosine {tiled} < {MIN_SELF_CHECK_COSINE}")
    if not grouped < 0.999:
        raise AssertionError(f"GDN layer 0: the wrong (grouped) head map also matches HF ({grouped})")
    logits = numpy_reference.forward_logits(f32_tensors, ids, sizes)
    logits_cos = numpy_reference.cosine(logits, hf_logits)
    logits_err = float(np.abs(logits - hf_logits).max())
    if not (logits_cos >= MIN_SELF_CHECK_COSINE and logits_err < 1e-3):
        raise AssertionError(f"whole model: numpy GGUF forward vs HF cosine {logits_cos}, max abs {logits_err}")
    return {
        "gdn_layer0_cosine_tiled_map": tiled,
        "gdn_layer0_cosine_grouped_map_should_be_low": grouped,
        "logits_cosine": logits_cos,
        "logits_max_abs_error": logits_err,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "tests" / "fixtures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)

    vocab = tokenizer.build_tiny_vocab()
    sizes = model.ModelSizes(vocab_size=len(vocab.tokens))
    config = model.hf_config(sizes, vocab.bos_id, vocab.eos_id, vocab.pad_id)
    prompt_ids = vocab.tokenizer.encode(PROMPT_TEXT).ids
    if not 24 <= len(prompt_ids) <= 40:
        raise AssertionError(f"prompt has {len(prompt_ids)} tokens, wanted 24..40")

    reference = model.build_model(config)
    hf_shapes = {name: tuple(p.shape) for name, p in reference.named_parameters()}
    n_plain_tokens = 256 + len(vocab.merges)
    converted = convert.hf_to_gguf(model.random_state_dict(reference, SEED, n_plain_tokens), sizes)

    variants, report = {}, {}
    for variant in gguf_file.VARIANTS:
        gguf_path = args.out / f"tiny-{variant}.gguf"
        types = gguf_file.write_gguf(gguf_path, variant, converted, sizes, vocab)
        held = gguf_file.read_dequantized(gguf_path)
        if variant == "f32":
            check_f32_round_trip(converted, held)

        # The golden runs on exactly the weights this file holds, mapped back to HF conventions.
        hf = model.build_model(config)
        model.load_state(hf, convert.gguf_to_hf(held, hf_shapes, sizes))
        result = golden.run_golden(hf, prompt_ids, N_GREEDY)
        check_golden_quality(variant, result, n_plain_tokens)
        logits_name = f"tiny-{variant}.logits.npy"
        np.save(args.out / logits_name, result.prompt_logits)

        variants[variant] = {
            "gguf": gguf_path.name,
            "logits": logits_name,
            "greedy_ids": result.greedy_ids,
            "min_top1_margin": min(result.greedy_margins),
            "greedy_top1_margins": result.greedy_margins,
            "min_prompt_top1_margin": min(result.prompt_margins),
            "tensor_types": {t: sum(1 for v in types.values() if v == t) for t in sorted(set(types.values()))},
        }
        report[variant] = {
            "hf_whole_prompt_vs_stepwise_max_abs": result.full_vs_stepwise_max_abs,
            **golden.spread_stats(result.prompt_logits),
            "distinct_greedy_tokens": len(set(result.greedy_ids)),
        }
        if variant == "f32":
            report["numpy_gguf_forward_vs_hf"] = numpy_self_check(held, hf, prompt_ids, sizes, result.prompt_logits)

    golden_json = {
        "prompt_text": PROMPT_TEXT,
        "prompt_ids": prompt_ids,
        "seed": SEED,
        "config": sizes.as_json(),
        "special_ids": {
            "bos": vocab.bos_id,
            "eos": vocab.eos_id,
            "padding": vocab.pad_id,
            **{text: vocab.tokens.index(text) for text, _ in tokenizer.ADDED_TOKENS},
        },
        "n_greedy": N_GREEDY,
        "variants": variants,
        "tokenizer_cases": tokenizer_cases(vocab),
        "checks": report,
    }
    (args.out / "golden.json").write_text(to_json(golden_json))
    (args.out / "tiny-tokenizer.json").write_text(vocab.tokenizer.to_str(pretty=True) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
