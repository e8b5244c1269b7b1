#!/bin/bash
# Device run 41: E = the head after runs 39-40 (the GEMM epilogue add, split-K, --q4k-in-gemm and
# --gemv-half-subgroups removed, Q6_K blocks padded to words by default; gemm_coop.wgsl is
# c0d76db's but for the block-shape constants) against base = c0d76db (run 34's code plus run 37's
# decode attention) in the same call, two rounds; check on E; llama-bench beside if the machine
# has a build (add run 39's build lines to get one). .bin/base.xz and .bin/E.xz: stripped release
# binaries of c0d76db and the head, xz-compressed.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in base E; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
M=/dev/shm/m.gguf
[ -f $M ] || /tmp/E synth --preset qwen3.6-27b --quant q4_k_m -o $M > /tmp/synth.txt 2>&1
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
t "check"; sec "check E"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/E check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt 300 ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 100 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
for round in 1 2; do
  for v in base E; do
    b "bench $v (round $round): -p 512,1024,4096 -n 128 -r 2" /tmp/$v bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2
  done
done
if [ -x /tmp/lb/bin/llama-bench ]; then
  b "llama-bench -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2
else
  sec "llama-bench: not run (no build on this machine)"
fi
b "bench E --profile -p 512 -n 16" /tmp/E bench -m $M --backend wgpu --profile -p 512 -n 16 -r 1
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
t done
