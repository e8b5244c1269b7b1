#!/bin/bash
# Device run 26: first run on a GPU of the session's merged head (7c5196f): the new kernels' tests on the
# tensor cores (cooperative attention prefill, cooperative delta rule, decode attention by kv head), check
# with the default model as the fourth fixture, and a first look at prefill/decode with each new path off.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in new wgpu_ops; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(/tmp/new synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf > /tmp/synth.txt 2>&1; echo SYNTH_RC=$? >> /tmp/synth.txt) &
t "check"; QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/new check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; echo "rc=$?"; tail -1 $OUT/check.txt
t "wgpu_ops"; [ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1 timeout 120 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
grep -E "^test result|FAILED|panicked|SKIP" $OUT/wgpu_ops.txt | head -8
t "synth wait"; wait; tail -1 /tmp/synth.txt
M=/dev/shm/m.gguf
for flags in "" "--no-cooperative-attention" "--per-head-attention" "--cooperative-delta-rule"; do
  t "bench $flags"; echo "=== bench -p 512,4096 -n 64 -r 1 $flags" >> $OUT/bench.txt
  timeout 60 /tmp/new bench -m $M --backend wgpu -p 512,4096 -n 64 -r 1 $flags >> $OUT/bench.txt 2>/tmp/bench.err; echo "rc=$?"
  grep -iE "error|attention|cooperative" /tmp/bench.err | head -3
done
grep -E "^wgpu" $OUT/bench.txt
t done
