#!/usr/bin/env python3
"""Build the tiny qwen35 fixture from one seed: its Hugging Face checkpoint, three GGUF variants,
the HF-transformers goldens for each, the convert -> quantize round trip's golden, and tokenizer
test cases. See tests/fixtures/README.md.

    cargo build --release
    python3 scripts/make_fixture.py [--qwen35 target/release/qwen35] [--out tests/fixtures]

The GGUF side is written by `qwen35` itself where it can be: tiny-f32.gguf is
`qwen35 convert hf/ --outtype f32`, tiny-q8_0.gguf `qwen35 quantize tiny-f32.gguf q8_0` (checked
to be the very file llama-quantize b11434 writes). tiny-q4_k.gguf is a mix no llama-quantize type
produces (Q4_K with Q6_K and legacy Q5_0 tensors), so this script writes it through gguf-py.

Deterministic: the same bytes on every run (seeded numpy init, single-threaded torch).
"""

import argparse
import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

from fixture import checkpoint, convert, golden, gguf_file, model, numpy_reference, tokenizer

ROOT = Path(__file__).resolve().parent.parent

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


def check_convert_against_script(written: list[tuple[str, np.ndarray]], read: dict[str, np.ndarray]) -> int:
    """`qwen35 convert`'s F32 tensors against this script's own conversion (fixture/convert.py):
    the same names, shapes and values, but for ssm_a = -exp(A_log), where numpy's exp and the
    converter's may round one ulp apart. Returns how many ssm_a values do."""
    if set(read) != {name for name, _ in written}:
        raise AssertionError("tensor names in tiny-f32.gguf differ from the script's conversion")
    n_ulp = 0
    for name, array in written:
        got = np.ascontiguousarray(read[name])
        if got.shape != array.shape:
            raise AssertionError(f"{name}: shape {got.shape} in tiny-f32.gguf, {array.shape} converted here")
        if name.endswith(".ssm_a"):
            ulps = np.abs(got.view(np.int32).astype(np.int64) - array.view(np.int32))
            if ulps.max() > 1:
                raise AssertionError(f"{name}: {int(ulps.max())} ulp from the script's -exp(A_log)")
            n_ulp += int(np.count_nonzero(ulps))
        elif not np.array_equal(got, array):
            raise AssertionError(f"{name}: tiny-f32.gguf differs from the script's conversion")
    return n_ulp


def check_llama_quantize_digest(path: Path, quant: str) -> None:
    """The file is byte for byte what llama-quantize b11434 wrote for the same input
    (hf-llama-quantize-b11434.json, also checked by tests/quantize.rs)."""
    reference = json.loads((ROOT / "tests" / "fixtures" / "hf-llama-quantize-b11434.json").read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != reference[quant]["file_sha256"]:
        raise AssertionError(f"{path.name}: sha256 {digest} is not llama-quantize's {quant} file")


def qwen35(binary: Path, *args) -> None:
    subprocess.run([str(binary), *(str(a) for a in args), "--force"], check=True)


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
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures")
    parser.add_argument("--qwen35", type=Path, default=ROOT / "target" / "release" / "qwen35")
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
    state = model.random_state_dict(reference, SEED, n_plain_tokens)
    converted = convert.hf_to_gguf(state, sizes)

    # The checkpoint gets a config of its own: write_checkpoint edits it for save_pretrained.
    hf_dir = args.out / "hf"
    saved = model.build_model(model.hf_config(sizes, vocab.bos_id, vocab.eos_id, vocab.pad_id))
    model.load_state(saved, state)
    checkpoint.write_checkpoint(hf_dir, saved, vocab)

    paths = {variant: args.out / f"tiny-{variant}.gguf" for variant in ("f32", "q8_0", "q4_k")}
    qwen35(args.qwen35, "convert", hf_dir, "-o", paths["f32"], "--outtype", "f32")
    qwen35(args.qwen35, "quantize", paths["f32"], paths["q8_0"], "q8_0")
    check_llama_quantize_digest(paths["q8_0"], "q8_0")
    gguf_file.write_q4_k_gguf(paths["q4_k"], converted, sizes, vocab)

    variants, report = {}, {}
    for variant, gguf_path in paths.items():
        held = gguf_file.read_dequantized(gguf_path)
        if variant == "f32":
            report["convert_vs_script_ssm_a_values_one_ulp_apart"] = check_convert_against_script(converted, held)

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
            "tensor_types": gguf_file.tensor_type_counts(gguf_path),
        }
        report[variant] = {
            "hf_whole_prompt_vs_stepwise_max_abs": result.full_vs_stepwise_max_abs,
            **golden.spread_stats(result.prompt_logits),
            "distinct_greedy_tokens": len(set(result.greedy_ids)),
        }
        if variant == "f32":
            report["numpy_gguf_forward_vs_hf"] = numpy_self_check(held, hf, prompt_ids, sizes, result.prompt_logits)

    # The round trip tests/quantize.rs runs: convert -> quantize q4_k_m (its q8_0 round trip
    # is tiny-q8_0.gguf itself). Its margins are smaller, so they are recorded, not asserted.
    with tempfile.TemporaryDirectory() as scratch:
        q4_k_m = Path(scratch) / "q4_k_m.gguf"
        qwen35(args.qwen35, "quantize", paths["f32"], q4_k_m, "q4_k_m")
        check_llama_quantize_digest(q4_k_m, "q4_k_m")
        hf = model.build_model(config)
        model.load_state(hf, convert.gguf_to_hf(gguf_file.read_dequantized(q4_k_m), hf_shapes, sizes))
        result = golden.run_golden(hf, prompt_ids, N_GREEDY)
    np.save(args.out / "roundtrip-q4_k_m.logits.npy", result.prompt_logits)
    roundtrip = {
        "q4_k_m": {
            "greedy_ids": result.greedy_ids,
            "min_greedy_top1_margin": min(result.greedy_margins),
            "min_prompt_top1_margin": min(result.prompt_margins),
        }
    }

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
    (args.out / "roundtrip.json").write_text(json.dumps(roundtrip, indent=1) + "\n")
    (args.out / "tiny-tokenizer.json").write_text(vocab.tokenizer.to_str(pretty=True) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
