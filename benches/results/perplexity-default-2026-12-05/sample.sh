#!/bin/bash
# The reference for tests/perplexity.rs's default-model case: llama-perplexity on the committed
# held-out sample, on the Q8_0 file and on its weights dequantized to F32. Run from the repository
# root. LLAMA: llama.cpp b11434's llama-perplexity; PYTHON: a Python with gguf 0.19.0.
set -euo pipefail
R=benches/results/perplexity-default-2026-12-05
D=${DEQUANT_DIR:-/tmp}
$PYTHON benches/results/perplexity-2026-12-05/dequantize.py models/qwen35-default-q8_0.gguf $D/default-q8_0-dequant.gguf
for m in q8_0-dequant:$D/default-q8_0-dequant.gguf q8_0:models/qwen35-default-q8_0.gguf; do
  # llama.cpp's logger can lose its last lines when the program exits: run again (at most 5 times).
  for _ in 1 2 3 4 5; do
    $LLAMA -m ${m#*:} -f tests/data/default-heldout.txt -c 256 -t 2 > $R/sample-llama-perplexity-${m%%:*}-ctx256.txt 2>&1
    grep -aq "Final estimate" $R/sample-llama-perplexity-${m%%:*}-ctx256.txt && break
  done
done
for b in cpu cpu-fast wgpu; do
  target/release/qwen35 perplexity -m models/qwen35-default-q8_0.gguf -f tests/data/default-heldout.txt --ctx 256 --backend $b > $R/sample-qwen35-q8_0-$b-ctx256.txt 2>&1
done
