#!/usr/bin/env python3
"""HF goldens for the convert -> quantize round trip (tests/quantize.rs): for each file made by

    qwen35 convert tests/fixtures/hf -o rt-f32.gguf --outtype f32
    qwen35 quantize rt-f32.gguf rt-TYPE.gguf TYPE

the weights it holds (dequantized with gguf-py, mapped back to HF conventions) run in HF
transformers float32 exactly as scripts/make_fixture.py runs the fixture's goldens: teacher-forced
logits through the cache, and 32 greedy tokens. Writes tests/fixtures/roundtrip-TYPE.logits.npy
and tests/fixtures/roundtrip.json.

    python scripts/make_roundtrip_golden.py q4_k_m=rt-q4_k_m.gguf q8_0=rt-q8_0.gguf
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch

from fixture import convert, gguf_file, golden, model, tokenizer
from make_fixture import N_GREEDY, PROMPT_TEXT

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def main() -> None:
    torch.set_num_threads(1)
    vocab = tokenizer.build_tiny_vocab()
    sizes = model.ModelSizes(vocab_size=len(vocab.tokens))
    config = model.hf_config(sizes, vocab.bos_id, vocab.eos_id, vocab.pad_id)
    prompt_ids = vocab.tokenizer.encode(PROMPT_TEXT).ids
    shapes = {name: tuple(p.shape) for name, p in model.build_model(config).named_parameters()}
    result = {}
    for arg in sys.argv[1:]:
        name, path = arg.split("=", 1)
        hf = model.build_model(config)
        model.load_state(hf, convert.gguf_to_hf(gguf_file.read_dequantized(Path(path)), shapes, sizes))
        run = golden.run_golden(hf, prompt_ids, N_GREEDY)
        np.save(OUT / f"roundtrip-{name}.logits.npy", run.prompt_logits)
        result[name] = {
            "greedy_ids": run.greedy_ids,
            "min_greedy_top1_margin": float(min(run.greedy_margins)),
            "min_prompt_top1_margin": float(min(run.prompt_margins)),
        }
        print(name, result[name])
    (OUT / "roundtrip.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
