#!/bin/bash
# Produces the outputs here; run from the repository root. Q: a release build of qwen35 (this run:
# target/release/qwen35 of commit 9fd8f6b, copied to /tmp/qwen35-ppl); CHITCHAT: chitchat_dataset/dataset.json
# of the chitchat-dataset==0.9.0 wheel (`pip download --no-deps chitchat-dataset==0.9.0`, unzipped);
# WordNet from the Debian package wordnet-base (/usr/share/wordnet).
set -euo pipefail
R=benches/results/perplexity-default-2026-12-07
Q=${Q:-target/release/qwen35}
D=target/dppl
V=target/ppl-venv
python3 -m venv $V
$V/bin/pip install torch==2.15.0 transformers==5.25.0 gguf==0.19.0 tokenizers==0.23.3 numpy==2.4.6
# The held-out split as text: its documents joined by a blank line, no final newline.
python3 scripts/default_model/corpus.py --chitchat $CHITCHAT --out $D
python3 -c "
import json
docs = [json.loads(line) for line in open('$D/heldout.jsonl', encoding='utf-8')]
open('$D/heldout.txt', 'w', encoding='utf-8', newline='').write('\n\n'.join(docs))"
$Q tokenize -m models/qwen35-default-q8_0.gguf --no-special -f $D/heldout.txt > $D/heldout.ids
# The bundled Q8_0 weights dequantized to an all-F32 GGUF, for qwen35.
$V/bin/python benches/results/perplexity-2026-12-05/dequantize.py models/qwen35-default-q8_0.gguf $D/qwen35-default-q8_0-dequant-f32.gguf
sha256sum models/qwen35-default-q8_0.gguf $D/qwen35-default-q8_0-dequant-f32.gguf $D/heldout.txt $D/heldout.ids > $R/sha256.txt
# transformers on the same dequantized weights (built in memory from the Q8_0 GGUF, goldens.py's builder).
nice -n 19 $V/bin/python scripts/default_model/hf_perplexity.py --gguf models/qwen35-default-q8_0.gguf \
  --ids $D/heldout.ids --threads 2 > $R/transformers-q8_0-dequant.txt 2> $R/transformers-q8_0-dequant.stderr.txt
nice -n 19 $Q perplexity -m $D/qwen35-default-q8_0-dequant-f32.gguf -f $D/heldout.txt --ctx 512 --backend cpu \
  > $R/qwen35-q8_0-dequant-f32-cpu.txt 2>&1
