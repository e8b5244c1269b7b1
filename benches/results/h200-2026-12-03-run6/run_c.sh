#!/bin/bash
# Device run C: GEMV variants E (word_at with a branch) and F (branch-free word_at) after the
# Q4_K/Q6_K mantissa revert, then llama.cpp CUDA and qwen35 (E) back to back on the 27B file.
cd "$(dirname "$0")/.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for b in E F; do gunzip -c .bin/qwen35-$b.gz > /tmp/q-$b; chmod +x /tmp/q-$b; done
mkdir -p .llama && tar xzf .bin/llama-src.tgz -C .llama
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
t "build llama.cpp in background"
(cd .llama && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/lb -j14 --target llama-bench; echo BUILD_RC=\$?" > $OUT/llama-build.log 2>&1 < /dev/null &)
t "synth"; /tmp/q-E synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "gpu warm-up"; /tmp/q-E bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
t "gemv"
for round in 1 2; do for b in E F; do
  for shape in "q4_k 17408 5120" "q6_k 5120 17408" "q6_k 248320 5120" "q8_0 17408 5120"; do
    set -- $shape
    echo "== $b round $round gemv $1 rows $2 cols $3" >> $OUT/gemv.txt
    /tmp/q-$b bench gemv --backend wgpu --quant $1 --rows $2 --cols $3 -r 400 >> $OUT/gemv.txt 2>&1
  done; done; done
grep -E "^==|back to back" $OUT/gemv.txt
t "check E"; /tmp/q-E check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; tail -6 $OUT/check.txt
while ! grep -q BUILD_RC $OUT/llama-build.log; do sleep 3; done; t "$(grep BUILD_RC $OUT/llama-build.log)"
t "llama-bench"; /tmp/lb/bin/llama-bench -m /dev/shm/m.gguf -ngl 99 -fa 1 -p 512,1024 -n 128 -r 3 > $OUT/llama-bench.txt 2>&1; grep -E "^\|" $OUT/llama-bench.txt
t "qwen35 E bench wgpu+cpu-fast+cpu"
/tmp/q-E bench -m /dev/shm/m.gguf --backend wgpu,cpu-fast,cpu -p 512,1024 -n 128 -r 3 --cpu-prompt 16 --cpu-decode 4 --profile --json $OUT/bench.json > $OUT/bench.txt 2>&1; head -12 $OUT/bench.txt; grep -A8 "profile wgpu, decode" $OUT/bench.txt
t "qwen35 F wgpu"; /tmp/q-F bench -m /dev/shm/m.gguf --backend wgpu -p 1024 -n 128 -r 3 > $OUT/bench-F.txt 2>&1; head -6 $OUT/bench-F.txt
t "save llama-bench"; mkdir -p /tmp/ls && cp -L /tmp/lb/bin/llama-bench /tmp/lb/bin/*.so* /tmp/ls/ 2>/dev/null; (cd /tmp && tar czf $OUT/llama-cuda-bin.tgz ls); ls -la $OUT/llama-cuda-bin.tgz
t done
