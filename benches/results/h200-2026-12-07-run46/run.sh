#!/bin/bash
# Device run 46: the head's code (E = 62bb54c: f16 weight copies by default where the Vulkan
# driver reports room) reported whole on one card, llama.cpp b11434 CUDA built beside: prefill
# pp512/1024/4096/16384 and tg128 (also with --f16-weight-copies 0, the old default), decode at
# depth 4096/32768, the prefill ladder, `bench gemm` TFLOP/s and `bench gemv` TB/s by 27B shape,
# a profile at P=512; two rounds of the prefill rows.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
tar -xJf .bin/bins.tar.xz -C /tmp && chmod +x /tmp/E
if [ ! -x /tmp/lb/bin/llama-bench ]; then
  mkdir -p /tmp/llama && tar -xJf .bin/llama-src.tar.xz -C /tmp/llama
  (cd /tmp/llama/llama.cpp && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF && cmake --build /tmp/lb --target llama-bench -j12; echo BUILD_RC=\$?" > /tmp/llama-build.log 2>&1 < /dev/null &)
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv,noheader
M=/dev/shm/m.gguf
[ -f $M ] || /tmp/E synth --preset qwen3.6-27b --quant q4_k_m -o $M > /tmp/synth.txt 2>&1
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
t "check E"; sec "check E"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/E check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LATEST:-500} ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 120 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
P="-p 512,1024,4096 -n 128 -r 2"
t "bench E (round 1, llama.cpp building beside), its log"; sec "bench E (auto copies; round 1, llama.cpp building beside): -p 512,1024,4096,16384 -n 128 -r 2"
RUST_LOG=qwen35::backend=info timeout 150 /tmp/E bench -m $M --backend wgpu -p 512,1024,4096,16384 -n 128 -r 2 >> $R 2> $OUT/e-auto-stderr.txt; echo "rc=$?" | tee -a $R
b "bench E --f16-weight-copies 0 (the old default; round 1): $P" /tmp/E bench -m $M --backend wgpu --f16-weight-copies 0 $P
b "bench E: -p 512 -n 128 -d 4096,32768 -r 1" /tmp/E bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1
b "bench E --ladder -n 16 -r 1" /tmp/E bench -m $M --backend wgpu --ladder -n 16 -r 1
b "bench gemm E -p 512,1024,4096,16384" /tmp/E bench gemm --backend wgpu -p 512,1024,4096,16384
for s in q4_k:17408:5120 q4_k:5120:17408 q4_k:10240:5120 q6_k:5120:17408 q6_k:248320:5120; do
  IFS=: read q rows cols <<< "$s"
  LATEST=280 b "bench gemv E --quant $q --rows $rows --cols $cols" /tmp/E bench gemv --backend wgpu --quant $q --rows $rows --cols $cols -r 200
done
t "llama.cpp's build"; for i in $(seq 60); do grep -q BUILD_RC /tmp/llama-build.log 2>/dev/null && break; sleep 5; done
tail -1 /tmp/llama-build.log | tee -a $R
if [ -x /tmp/lb/bin/llama-bench ]; then
  b "llama-bench -ngl 99 -fa 1 -p 512,1024,4096,16384 -n 128 -r 2" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 512,1024,4096,16384 -n 128 -r 2
  b "llama-bench -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1
else
  sec "llama-bench: not run (its build had not finished)"
fi
b "bench E (auto copies; round 2): -p 512,1024,4096,16384 -n 128 -r 2" /tmp/E bench -m $M --backend wgpu -p 512,1024,4096,16384 -n 128 -r 2
b "bench E --f16-weight-copies 0 (round 2): $P" /tmp/E bench -m $M --backend wgpu --f16-weight-copies 0 $P
LATEST=530 b "bench E --profile -p 512 -n 16 -r 1" /tmp/E bench -m $M --backend wgpu --profile -p 512 -n 16 -r 1
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
tail -5 /tmp/llama-build.log > $OUT/llama-build-tail.txt 2>/dev/null
t done
