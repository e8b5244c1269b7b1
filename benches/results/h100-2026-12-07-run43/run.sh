#!/bin/bash
# Device run 43: the head with and without the weights' f16 copies kept for the prefill GEMM
# (--f16-weight-copies 40000000000: 40 GB of the 49 GB all of the 27B's take; run 42's unbounded
# copies ran the H100 out of memory), alternating, in one call; check with the copies.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/E.xz').read())" > /tmp/E; chmod +x /tmp/E
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
M=/dev/shm/m.gguf
[ -f $M ] || /tmp/E synth --preset qwen3.6-27b --quant q4_k_m -o $M > /tmp/synth.txt 2>&1
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
C="--f16-weight-copies 40000000000"
t "check"; sec "check $C"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/E check --fixtures tests/fixtures --backend cpu,wgpu $C >> $R 2>&1; echo "rc=$?" | tee -a $R
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt 150 ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 90 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
for round in 1 2; do
  b "bench (round $round): -p 512,1024,4096 -n 16 -r 2" /tmp/E bench -m $M --backend wgpu -p 512,1024,4096 -n 16 -r 2
  b "bench $C (round $round): -p 512,1024,4096 -n 16 -r 2" /tmp/E bench -m $M --backend wgpu $C -p 512,1024,4096 -n 16 -r 2
done
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
nvidia-smi --query-gpu=memory.total --format=csv,noheader >> $R
t done
