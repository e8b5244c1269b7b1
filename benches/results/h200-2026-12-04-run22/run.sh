#!/bin/bash
# Device run 22: decode A/B of G2 (the GEMV parts at a compile-time 32), run 20's W4E patch and
# N (2c1a54d, the session's start); the wgpu_ops tests of G2 on the H200 first.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
V="G2 W4E N"
for v in $V; do gunzip -c .bin/q-$v.gz > /tmp/q-$v; chmod +x /tmp/q-$v; done
gunzip -c .bin/wgpu_ops.gz > /tmp/wgpu_ops; chmod +x /tmp/wgpu_ops
t "synth"; /tmp/q-G2 synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "wgpu_ops tests of G2"; mkdir -p /work; ln -sfn "$PWD" /work/main
QWEN35_REQUIRE_GPU=1 /tmp/wgpu_ops --test-threads 1 2>&1 | tail -3
t "check G2"; /tmp/q-G2 check --fixtures tests/fixtures --backend cpu,wgpu 2>&1 | tail -4
/tmp/q-G2 bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 500 > /dev/null 2>&1
for round in 1 2; do for v in $V; do
  /tmp/q-$v bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 3 > /tmp/b.txt 2>&1
  t "$v round $round: $(grep -E '^wgpu' /tmp/b.txt)"
done; done
t "profile G2"; /tmp/q-G2 bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 1 --profile 2>&1 | grep -A5 "profile wgpu, decode"
t done
