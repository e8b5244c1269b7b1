#!/bin/bash
# Device run 36: the landed head with the delta-rule kernels sharing their operands file (a refactor
# after run 34's d2ff4dc): check, wgpu_ops and the prefill/decode bench, to confirm nothing moved.
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
(/tmp/new synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf > /tmp/synth.txt 2>&1; echo SYNTH_RC=$? >> /tmp/synth.txt) &
SYNTH=$!
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
t "check"; sec "check new"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/new check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
t "wgpu_ops"; sec "wgpu_ops new (QWEN35_REQUIRE_COOPERATIVE=1)"
QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1 timeout 150 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?" | tee -a $R
grep -E "^test result|FAILED|panicked" $OUT/wgpu_ops.txt | head -12 | tee -a $R
t "synth wait"; wait $SYNTH; tail -1 /tmp/synth.txt
M=/dev/shm/m.gguf
b() { local name=$1; shift; t "$name"; sec "$name"; timeout 100 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
b "bench new: -p 512,1024,4096 -n 128 -r 2" /tmp/new bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
t done
