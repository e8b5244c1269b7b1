#!/bin/bash
# Device run 21: llama.cpp b11434 CUDA and qwen35 binary G (this session's GEMV changes: integer
# spans converted without the conversion unit, four-part GEMV workgroups, Q4_K scales by selects)
# back to back on the 27B-shaped Q4_K_M file; N (2c1a54d, the session's start) alternated with G
# for decode; the wgpu_ops tests of G on the H200.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in G N; do gunzip -c .bin/q-$v.gz > /tmp/q-$v; chmod +x /tmp/q-$v; done
gunzip -c .bin/wgpu_ops.gz > /tmp/wgpu_ops; chmod +x /tmp/wgpu_ops
mkdir -p .llama && tar xzf .bin/llama-src.tgz -C .llama
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
t "build llama.cpp in background"
(cd .llama && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/lb -j14 --target llama-bench; echo BUILD_RC=\$?" > $OUT/llama-build.log 2>&1 < /dev/null &)
t "synth"; /tmp/q-G synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "wgpu_ops tests of G"; mkdir -p /work; ln -sfn "$PWD" /work/main
QWEN35_REQUIRE_GPU=1 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?" >> $OUT/wgpu_ops.txt; tail -3 $OUT/wgpu_ops.txt
t "check G"; RUST_LOG=info /tmp/q-G check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; grep -m1 GEMV $OUT/check.txt; tail -4 $OUT/check.txt
t "gpu warm-up"; /tmp/q-G bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for round in 1 2; do for v in N G; do
  /tmp/q-$v bench -m /dev/shm/m.gguf --backend wgpu -p 16 -n 128 -r 3 > $OUT/decode-$v-$round.txt 2>&1
  t "$v round $round: $(grep -E '^wgpu' $OUT/decode-$v-$round.txt)"
done; done
t "qwen35 bench wgpu, profiled"
/tmp/q-G bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024 -n 128 -r 3 --profile --json $OUT/bench.json > $OUT/bench.txt 2>&1
head -6 $OUT/bench.txt; grep -A16 "profile wgpu, decode" $OUT/bench.txt
while ! grep -q BUILD_RC $OUT/llama-build.log; do sleep 3; done; t "$(grep BUILD_RC $OUT/llama-build.log)"
t "llama-bench"; /tmp/lb/bin/llama-bench -m /dev/shm/m.gguf -ngl 99 -fa 1 -p 512,1024 -n 128 -r 3 > $OUT/llama-bench.txt 2>&1; grep -E "^\|" $OUT/llama-bench.txt
t "qwen35 bench wgpu again, after llama.cpp"
/tmp/q-G bench -m /dev/shm/m.gguf --backend wgpu -p 1024 -n 128 -r 3 > $OUT/bench-after.txt 2>&1; head -6 $OUT/bench-after.txt
t done
