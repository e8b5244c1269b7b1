#!/bin/bash
# Produces the llama-perplexity and qwen35 outputs here; run from the repository root.
# LLAMA: llama.cpp b11434's llama-perplexity (CPU build, as in ../perplexity-2026-12-05/README.md);
# CKPT: the training run's float checkpoint with tokenizer.json and tokenizer_config.json beside it;
# TEXT: the held-out split as text (see README.md); F32: where to write the F32 GGUF.
set -euo pipefail
R=benches/results/perplexity-default-2026-12-05
Q=target/release/qwen35
# llama.cpp's logger can lose its last lines when the program exits: run again until the final
# estimate is there, at most five times.
llama() {
  local out=$1; shift
  for _ in 1 2 3 4 5; do
    $LLAMA "$@" > $out 2>&1
    grep -aq "Final estimate" $out && return 0
  done
  return 1
}
$Q convert $CKPT -o $F32 --outtype f32
sha256sum $F32 models/qwen35-default-q8_0.gguf models/qwen35-default-q4_k_m.gguf $TEXT > $R/sha256.txt
(cd $CKPT && sha256sum config.json model*.safetensors* tokenizer*.json) >> $R/sha256.txt
for v in f32 q8_0 q4_k_m; do
  m=models/qwen35-default-$v.gguf
  [ $v = f32 ] && m=$F32
  llama $R/llama-perplexity-$v.txt -m $m -f $TEXT -c 512 -t 2
  $Q perplexity -m $m -f $TEXT --ctx 512 --backend cpu > $R/qwen35-$v-cpu.txt 2>&1
done
$Q tokenize -m $F32 --no-special -f $TEXT > $TEXT.ids
