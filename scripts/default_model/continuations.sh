#!/usr/bin/env bash
# Greedy continuations of ten story openings and the chat answer the model card quotes, from the
# bundled default model (no -m) on the CPU reference backend.
#   bash scripts/default_model/continuations.sh [QWEN35_BINARY] > benches/results/default-model/continuations.txt
set -euo pipefail
Q=${1:-target/release/qwen35}
openings=(
  "Once upon a time, there was a little cat named Tom."
  "One day, a brave dog went to the park."
  "There was once a shy mouse who lived near a river."
  "Lily was a curious girl."
  "In a small village, there lived an old horse."
  "One sunny morning, the duck saw a red ball."
  "Max and his friend Anna wanted to build a boat."
  "The little bird could not fly."
  "It was a cold and windy day in the forest."
  "A happy frog found a shiny stone by the pond."
)
for p in "${openings[@]}"; do
  echo "## $p"
  "$Q" run -p "$p" -n 64 --temp 0 --backend cpu 2>/dev/null
  echo
done
echo "## chat: Tell me a story about a cat."
printf 'Tell me a story about a cat.\n' | "$Q" chat -n 200 --backend cpu 2>/dev/null
