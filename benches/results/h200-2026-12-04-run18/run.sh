#!/bin/bash
# Device run 18: GEMV conversion cost. N = main (2c1a54d); F = Q4_K/Q6_K integer spans with their
# conversions off the conversion unit; Z = F without the Q4_K scale extraction (wrong results,
# ablation); H = F with half the Q4_K dot products (wrong results, ablation). Also the wgpu_ops
# tests on the H200.
cd "$(dirname "$0")/../../.." 2>/dev/null || true
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in N F Z H; do gunzip -c .bin/q-$v.gz > /tmp/q-$v; chmod +x /tmp/q-$v; done
gunzip -c .bin/wgpu_ops.gz > /tmp/wgpu_ops; chmod +x /tmp/wgpu_ops
t "synth"; /tmp/q-F synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "wgpu_ops tests"; mkdir -p /work; ln -sfn "$PWD" /work/main
QWEN35_REQUIRE_GPU=1 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?" >> $OUT/wgpu_ops.txt; tail -3 $OUT/wgpu_ops.txt
t "check F"; /tmp/q-F check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check-F.txt 2>&1; tail -3 $OUT/check-F.txt
t "warm-up"; /tmp/q-N bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for round in 1 2; do for v in N F Z H; do
  /tmp/q-$v bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 3 > $OUT/bench-$v-$round.txt 2>&1
  t "$v round $round: $(grep -E '^wgpu' $OUT/bench-$v-$round.txt)"
done; done
t "profile F"; /tmp/q-F bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 1 --profile > $OUT/profile-F.txt 2>&1
grep -A16 "profile wgpu, decode" $OUT/profile-F.txt
t done
