#!/bin/bash
# Device run 17: llama.cpp b11434 CUDA and qwen35 binary G (3b9c31b) back to back on the 27B-shaped
# Q4_K_M file: check, bench with profile, llama-bench, bench again, then the CPU fast path on the
# host's 16 cores (its code changed since run 6).
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
gunzip -c .bin/qwen35-G.gz > /tmp/q; chmod +x /tmp/q
mkdir -p .llama && tar xzf .bin/llama-src.tgz -C .llama
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
t "build llama.cpp in background"
(cd .llama && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/lb -j14 --target llama-bench; echo BUILD_RC=\$?" > $OUT/llama-build.log 2>&1 < /dev/null &)
t "synth"; /tmp/q synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "check"; /tmp/q check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; tail -4 $OUT/check.txt
t "gpu warm-up"; /tmp/q bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
t "qwen35 bench wgpu, profiled"
/tmp/q bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024 -n 128 -r 3 --profile --json $OUT/bench.json > $OUT/bench.txt 2>&1
head -6 $OUT/bench.txt; grep -A16 "profile wgpu, decode" $OUT/bench.txt
while ! grep -q BUILD_RC $OUT/llama-build.log; do sleep 3; done; t "$(grep BUILD_RC $OUT/llama-build.log)"
t "llama-bench"; /tmp/lb/bin/llama-bench -m /dev/shm/m.gguf -ngl 99 -fa 1 -p 512,1024 -n 128 -r 3 > $OUT/llama-bench.txt 2>&1; grep -E "^\|" $OUT/llama-bench.txt
t "qwen35 bench wgpu again, after llama.cpp"
/tmp/q bench -m /dev/shm/m.gguf --backend wgpu -p 1024 -n 128 -r 3 > $OUT/bench-after.txt 2>&1; head -6 $OUT/bench-after.txt
t "qwen35 bench cpu-fast on the host"
/tmp/q bench -m /dev/shm/m.gguf --backend cpu-fast -p 16 -n 4 -r 3 > $OUT/bench-cpu.txt 2>&1; head -4 $OUT/bench-cpu.txt
t done
