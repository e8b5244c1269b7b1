#!/bin/bash
# Device run 19: GEMV workgroups of several independent 32-invocation parts (more resident warps
# per SM: Hopper keeps at most 32 workgroups on an SM, so 32-invocation workgroups cap it at half
# its warps). F = 0bedbe6; W1 = F with the subgroup-only reduction (one part); W2, W4 = two and
# four parts of 32 invocations, two rows each.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
V="F W1 W2 W4"
for v in $V; do gunzip -c .bin/q-$v.gz > /tmp/q-$v; chmod +x /tmp/q-$v; done
t "synth"; /tmp/q-F synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
for v in W2 W4; do t "check $v: $(/tmp/q-$v check --fixtures tests/fixtures --backend cpu,wgpu 2>&1 | grep -c PASS) PASS lines"; done
/tmp/q-W2 check --fixtures tests/fixtures --backend cpu,wgpu 2>&1 | tail -4
t "warm-up"; /tmp/q-F bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for round in 1 2; do for v in $V; do
  /tmp/q-$v bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 3 > /tmp/b.txt 2>&1
  t "$v round $round: $(grep -E '^wgpu' /tmp/b.txt)"
done; done
t done
