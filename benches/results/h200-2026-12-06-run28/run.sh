#!/bin/bash
# Device run 28: where decode attention by kv head overtakes the per-head kernels: tg64 after prompts of
# 64..2048 tokens, both paths of the same binary (main 7c5196f's code), back to back.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/new.xz').read())" > /tmp/new; chmod +x /tmp/new
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t "synth"; /tmp/new synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
R=$OUT/results.txt
for round in 1 2; do
  for flags in "" "--per-head-attention"; do
    t "round $round $flags"; echo "=== round $round: bench -p 16 -n 64 -d 128,256,512,1024,2048 -r 2 $flags" >> $R
    timeout 60 /tmp/new bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 64 -d 128,256,512,1024,2048 -r 2 $flags >> $R 2>>/tmp/q.err; echo "rc=$?"
  done
done
grep -E "^===|^wgpu" $R
grep -iE "error|fail" /tmp/q.err | sort | uniq -c | head > $OUT/stderr-summary.txt
t done
