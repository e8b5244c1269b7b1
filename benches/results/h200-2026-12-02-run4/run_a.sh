#!/bin/bash
# Device run A: llama.cpp CUDA and qwen35 (wgpu + CPU) back to back on one synthetic 27B Q4_K_M file.
cd "$(dirname "$0")/.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
nvidia-smi > $OUT/nvidia-smi.txt 2>&1; lscpu > $OUT/lscpu.txt
t "build llama.cpp in background"
(cd .llama && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/lb -j16 --target llama-bench; echo BUILD_RC=\$?" > $OUT/llama-build.log 2>&1 < /dev/null &)
t "synth"; .bin/qwen35 synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -3
t "check fixtures"; .bin/qwen35 check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; tail -5 $OUT/check.txt
t "f32 GEMM prefill (while llama.cpp builds)"; QWEN35_COOPERATIVE_MATRIX=0 .bin/qwen35 bench -m /dev/shm/m.gguf --backend wgpu -p 1024 -n 16 -r 1 > $OUT/bench-f32gemm.txt 2>&1; grep -A3 "^backend" $OUT/bench-f32gemm.txt
while ! grep -q BUILD_RC $OUT/llama-build.log; do sleep 5; done; t "$(grep BUILD_RC $OUT/llama-build.log)"
t "llama-bench"; /tmp/lb/bin/llama-bench -m /dev/shm/m.gguf -ngl 99 -fa 1 -p 512,1024 -n 128 -r 3 > $OUT/llama-bench.txt 2>&1; cat $OUT/llama-bench.txt | grep -E "^\|"
t "qwen35 bench wgpu+cpu-fast+cpu"
.bin/qwen35 bench -m /dev/shm/m.gguf --backend wgpu,cpu-fast,cpu -p 512,1024 -n 128 -r 3 --cpu-prompt 16 --cpu-decode 4 --profile --json $OUT/bench.json > $OUT/bench.txt 2>&1; head -30 $OUT/bench.txt
t done
