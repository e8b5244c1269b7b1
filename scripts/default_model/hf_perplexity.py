#!/usr/bin/env python3
"""Perplexity of the default model's float checkpoint under transformers, chunked as llama-perplexity does.

    python3 scripts/default_model/hf_perplexity.py (--hf CHECKPOINT | --gguf FILE) --ids IDS [--ctx 512] [--chunks N] [--bos ID]

The weights come from an HF checkpoint folder (--hf) or from a GGUF (--gguf), every tensor of
which is dequantized to f32 and loaded into transformers' `Qwen3_5ForCausalLM` as goldens.py does.

IDS holds the token ids `qwen35 tokenize --no-special -f TEXT` prints for the text, so that
transformers scores exactly the tokens `qwen35 perplexity -f TEXT` and llama-perplexity do. The ids
are cut into non-overlapping chunks of CTX (a shorter tail is left out; at most N of them); each chunk runs from an
empty state in one forward, float32 on the CPU, and only rows CTX/2 .. CTX-2 are scored, each
against the next token. With --bos (a vocabulary that adds BOS) the ids get BOS in front and each
chunk's first token is replaced by it. Prints the running estimate per chunk and a
`Final estimate: PPL = x +/- err` line in llama-perplexity's format.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import Qwen3_5ForCausalLM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--hf", type=Path)
    source.add_argument("--gguf", type=Path)
    parser.add_argument("--ids", type=Path, required=True)
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--chunks", type=int)
    parser.add_argument("--bos", type=int)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    ids = [int(t) for t in args.ids.read_text().split()]
    if args.bos is not None:
        ids.insert(0, args.bos)
    chunks = min(len(ids) // args.ctx, args.chunks or len(ids))
    first = args.ctx // 2
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", file=sys.stderr)
    print(f"{len(ids)} tokens; {chunks} chunks of {args.ctx}", file=sys.stderr)
    torch.set_num_threads(args.threads)
    if args.hf is not None:
        model = Qwen3_5ForCausalLM.from_pretrained(args.hf, dtype=torch.float32).eval()
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from goldens import hf_model_from_gguf

        model = hf_model_from_gguf(args.gguf)
    nll_sum, nll2_sum, count = 0.0, 0.0, 0
    with torch.no_grad():
        for c in range(chunks):
            window = list(ids[c * args.ctx : (c + 1) * args.ctx])
            if args.bos is not None:
                window[0] = args.bos
            logits = model(input_ids=torch.tensor([window]), use_cache=False).logits[0]
            rows = logits[first : args.ctx - 1].numpy()
            targets = np.asarray(ids[c * args.ctx + first + 1 : (c + 1) * args.ctx])
            # As llama-perplexity: the maximum subtracted in f32, the exponentials summed in f64.
            top = rows.max(axis=-1, keepdims=True)
            shifted = rows - top
            logz = np.log(np.exp(shifted.astype(np.float64)).sum(axis=-1))
            nll = logz - shifted[np.arange(len(targets)), targets].astype(np.float64)
            nll_sum += float(nll.sum())
            nll2_sum += float((nll * nll).sum())
            count += len(nll)
            print(f"[{c + 1}]{np.exp(nll_sum / count):.4f}", file=sys.stderr, flush=True)
    mean = nll_sum / count
    ppl = float(np.exp(mean))
    error = float(np.sqrt(max(nll2_sum / count - mean * mean, 0.0) / (count - 1)) * ppl)
    print(f"scored tokens: {count}; mean NLL {mean:.10f}")
    print(f"Final estimate: PPL = {ppl:.4f} +/- {error:.5f}")


if __name__ == "__main__":
    main()
