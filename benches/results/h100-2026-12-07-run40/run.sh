#!/bin/bash
# Device run 40: where did prefill go? Run 39 measured the head (6cf5ed2) at pp512/1024/4096
# 1548/1999/2254 against run 34's 1742/2242/2668 (llama.cpp equal in both). Three binaries in one
# call: base = c0d76db (before the split-K / epilogue-add commit 6df45a6), B = 6cf5ed2 + the GEMM
# epilogue reading y only when it accumulates (it read y in every GEMM through a select), C = B
# with matmul_add's residual add back in its own pass (no epilogue add). Then B and C with
# --gemm-split-k auto and --q4k-in-gemm, and B with --q6-k-aligned (decode).
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in base B C; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
M=/dev/shm/m.gguf
[ -f $M ] || /tmp/B synth --preset qwen3.6-27b --quant q4_k_m -o $M > /tmp/synth.txt 2>&1
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt 480 ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 100 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
for v in base B C; do
  b "bench $v: -p 512,1024,4096 -n 128 -r 2" /tmp/$v bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2
done
b "bench B --gemm-split-k auto: -p 512,1024,4096 -n 16 -r 2" /tmp/B bench -m $M --backend wgpu --gemm-split-k auto -p 512,1024,4096 -n 16 -r 2
b "bench C --gemm-split-k auto: -p 512,1024,4096 -n 16 -r 2" /tmp/C bench -m $M --backend wgpu --gemm-split-k auto -p 512,1024,4096 -n 16 -r 2
b "bench C --q4k-in-gemm: -p 512,1024,4096 -n 16 -r 2" /tmp/C bench -m $M --backend wgpu --q4k-in-gemm -p 512,1024,4096 -n 16 -r 2
b "bench B --q6-k-aligned: -p 512 -n 128 -r 2" /tmp/B bench -m $M --backend wgpu --q6-k-aligned -p 512 -n 128 -r 2
for v in base B C; do
  b "bench $v (second round): -p 512,1024,4096 -n 128 -r 2" /tmp/$v bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2
done
b "bench B --profile -p 512 -n 16" /tmp/B bench -m $M --backend wgpu --profile -p 512 -n 16 -r 1
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
t done
