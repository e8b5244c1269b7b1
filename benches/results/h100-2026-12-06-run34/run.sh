#!/bin/bash
# Device run 34: the head as it lands (d2ff4dc: the staged delta-rule scan, the f16 x reused, f32 KV
# caches by default) against the session's start b6d299b (base), llama.cpp b11434 CUDA beside.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in new base wgpu_ops; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
mkdir -p /tmp/llama && tar -xJf .bin/llama-src.tar.xz -C /tmp/llama
(cd /tmp/llama/llama.cpp && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF && cmake --build /tmp/lb -j10 --target llama-bench; echo BUILD_RC=\$?" > /tmp/llama-build.log 2>&1 < /dev/null &)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
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
b "bench new: -p 512,1024,4096 -n 128 -r 3" /tmp/new bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 3 --json $OUT/bench-new.json
b "bench base: -p 512,1024,4096 -n 128 -r 2" /tmp/base bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2 --json $OUT/bench-base.json
b "bench new: -p 16384 -n 1 -r 1" /tmp/new bench -m $M --backend wgpu -p 16384 -n 1 -r 1
b "bench base: -p 16384 -n 1 -r 1" /tmp/base bench -m $M --backend wgpu -p 16384 -n 1 -r 1
b "bench new: -p 512 -n 128 -d 4096,32768 -r 1" /tmp/new bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1
b "bench new --ladder -p 256,512,1024,4096" /tmp/new bench -m $M --backend wgpu --ladder -p 256,512,1024,4096 -n 16 -r 1
b "bench new -p 4096 -n 32 -r 1 --profile" /tmp/new bench -m $M --backend wgpu -p 4096 -n 32 -r 1 --profile
b "bench gemm new" /tmp/new bench gemm -p 512,4096,16384 -r 3
t "waiting for llama.cpp's build"
for i in $(seq 1 150); do grep -q BUILD_RC /tmp/llama-build.log && break; sleep 2; done
tail -1 /tmp/llama-build.log | tee -a $R
t "llama-bench"; sec "llama-bench -ngl 99 -fa 1 -p 512,1024,4096,16384 -n 128 -r 3"
timeout 120 /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 512,1024,4096,16384 -n 128 -r 3 >> $R 2>>/tmp/ll.err; echo "rc=$?" | tee -a $R
t "llama-bench depth"; sec "llama-bench -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1"
timeout 90 /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1 >> $R 2>>/tmp/ll.err; echo "rc=$?" | tee -a $R
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
tail -c 20000 /tmp/ll.err >> $OUT/stderr-summary.txt
cp /tmp/llama-build.log $OUT/ 2>/dev/null
t done
