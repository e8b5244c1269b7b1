#!/bin/bash
# Produces every raw output in this directory; run from the repository root.
# LLAMA: llama.cpp b11434's llama-perplexity (CPU build, see README.md); GGUF_PY: its gguf-py.
set -euo pipefail
R=benches/results/perplexity-2026-12-05
Q=target/release/qwen35
T=tests/data/perplexity.txt
D=${DEQUANT_DIR:-/tmp}
# llama.cpp's logger writes from a thread and can lose the last lines when the program exits
# (common/log.cpp says so): run again until the final estimate is there, at most five times.
llama() {
  local out=$1; shift
  for _ in 1 2 3 4 5; do
    $LLAMA "$@" > $out 2>&1
    grep -aq "Final estimate" $out && return 0
  done
  return 1
}
for v in q8_0 q4_k; do
  PYTHONPATH=$GGUF_PY python3 $R/dequantize.py tests/fixtures/tiny-$v.gguf $D/tiny-$v-dequant.gguf
done
for v in f32 q8_0 q4_k; do
  for shape in "128 4" "512 6"; do
    set -- $shape
    name=ctx$1-chunks$2
    llama $R/llama-perplexity-$v-$name.txt -m tests/fixtures/tiny-$v.gguf -f $T -c $1 --chunks $2 -t 2
    if [ $v != f32 ]; then
      llama $R/llama-perplexity-$v-dequant-$name.txt -m $D/tiny-$v-dequant.gguf -f $T -c $1 --chunks $2 -t 2
    fi
    backends="cpu cpu-fast"
    [ $1 = 128 ] && backends="cpu cpu-fast wgpu"
    for b in $backends; do
      $Q perplexity -m tests/fixtures/tiny-$v.gguf -f $T --ctx $1 --chunks $2 --backend $b > $R/qwen35-$v-$b-$name.txt 2>&1
    done
  done
done
