#!/bin/bash
# Device run 20: F = 0bedbe6; E = F with the Q4_K scale extraction as selects of per-invocation
# constants; W4 = run 19's four-part GEMV workgroups; W4E = both; S = E with the RMS norms not run
# (wrong results; an ablation that prices the norms in decode).
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
V="F E W4 W4E S"
for v in $V; do gunzip -c .bin/q-$v.gz > /tmp/q-$v; chmod +x /tmp/q-$v; done
t "synth"; /tmp/q-F synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
for v in E W4E; do t "check $v: $(/tmp/q-$v check --fixtures tests/fixtures --backend cpu,wgpu 2>&1 | grep -c PASS) PASS lines"; done
/tmp/q-W4E check --fixtures tests/fixtures --backend cpu,wgpu 2>&1 | tail -4
t "warm-up"; /tmp/q-F bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for round in 1 2; do for v in $V; do
  /tmp/q-$v bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 3 > /tmp/b.txt 2>&1
  t "$v round $round: $(grep -E '^wgpu' /tmp/b.txt)"
done; done
t done
