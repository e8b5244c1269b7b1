#!/usr/bin/env python3
"""Held-out loss of the default model from transformers and from our engine, on the same tokens.

    python3 scripts/default_model/verify.py --hf HF_DIR --heldout heldout.u16 \
        --gguf models/qwen35-default-f32.gguf [--gguf models/qwen35-default-q8_0.gguf ...] \
        [--windows 8] [--length 512] [--out RESULT.json]

WINDOWS windows of LENGTH tokens spread evenly over the held-out split are scored
teacher-forced (each window's first token predicts the second, and so on): transformers in
float32 on the CPU, and `qwen35 eval --backend cpu` for each GGUF, whose logits are read back.
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import Qwen3_5ForCausalLM

ROOT = Path(__file__).resolve().parent.parent.parent


def nll(logits: np.ndarray, targets: np.ndarray) -> float:
    logits = logits.astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    logz = np.log(np.exp(logits - top).sum(axis=-1)) + top[:, 0]
    return float((logz - logits[np.arange(len(targets)), targets]).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hf", type=Path, required=True)
    parser.add_argument("--heldout", type=Path, required=True)
    parser.add_argument("--gguf", type=Path, action="append", default=[])
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--qwen35", type=Path, default=ROOT / "target/release/qwen35")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    ids = np.fromfile(args.heldout, dtype=np.uint16).astype(np.int64)
    # Spread over the whole split: it holds stories, then dialogues, chit-chat and WordNet text.
    stride = (len(ids) - args.length) // max(1, args.windows - 1)
    windows = [ids[i * stride : i * stride + args.length] for i in range(args.windows)]
    torch.set_num_threads(1)
    model = Qwen3_5ForCausalLM.from_pretrained(args.hf, dtype=torch.float32).eval()
    result = {"windows": args.windows, "length": args.length, "scored_tokens": args.windows * (args.length - 1)}
    with torch.no_grad():
        losses = [
            nll(model(torch.from_numpy(w)[None]).logits[0, :-1].numpy(), w[1:]) for w in windows
        ]
    result["transformers_f32"] = float(np.mean(losses))
    for gguf in args.gguf:
        losses = []
        with tempfile.TemporaryDirectory() as tmp:
            for k, w in enumerate(windows):
                tokens = Path(tmp) / f"w{k}.txt"
                tokens.write_text(" ".join(map(str, w)))
                dump = Path(tmp) / f"w{k}.npy"
                subprocess.run(
                    [str(args.qwen35), "eval", "-m", str(gguf), "--backend", "cpu", "--threads", "2",
                     "--tokens", str(tokens), "--dump-logits", str(dump)],
                    check=True, stderr=subprocess.DEVNULL,
                )
                losses.append(nll(np.load(dump)[:-1], w[1:]))
        result[f"qwen35_cpu {gguf.name}"] = float(np.mean(losses))
    base = result["transformers_f32"]
    for key in [k for k in result if k.startswith("qwen35_cpu")]:
        result[key.replace("qwen35_cpu", "relative_diff")] = (result[key] - base) / base
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
