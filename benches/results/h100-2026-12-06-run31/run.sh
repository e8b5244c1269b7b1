#!/bin/bash
# Device run 31: the session's final head (new: main with the f16 weight decode for the tensor-core GEMM, after
# the reverts of run 30) against main 8910fcb (base: run 29's binary), llama.cpp b11434 CUDA beside
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
R=$OUT/results.txt   # every table of the run, in order; log.txt has the console
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
t "check new"; sec "check new"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/new check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
t "wgpu_ops"; sec "wgpu_ops new (QWEN35_REQUIRE_COOPERATIVE=1)"
QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1 timeout 150 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?" | tee -a $R
grep -E "^test result|FAILED|panicked" $OUT/wgpu_ops.txt | head -12 | tee -a $R
t "synth wait"; wait $SYNTH; tail -1 /tmp/synth.txt
M=/dev/shm/m.gguf
for v in new base; do
  t "bench $v"; sec "bench $v: -p 512,1024,4096 -n 128 -r 3"
  timeout 90 /tmp/$v bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 3 --json $OUT/bench-$v.json >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
done
for v in new base; do
  t "pp16384 $v"; sec "bench $v: -p 16384 -n 1 -r 1"
  timeout 60 /tmp/$v bench -m $M --backend wgpu -p 16384 -n 1 -r 1 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
done
for v in new base; do
  t "depth $v"; sec "bench $v: -p 512 -n 128 -d 4096,32768 -r 1"
  timeout 90 /tmp/$v bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
done
t "profile"; sec "bench new -p 512 -n 32 -r 1 --profile"
timeout 60 /tmp/new bench -m $M --backend wgpu -p 512 -n 32 -r 1 --profile >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
t "ladder"; sec "bench new --ladder"
timeout 100 /tmp/new bench -m $M --backend wgpu --ladder -p 256,512,1024,4096 -n 16 -r 1 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
t "gemm"; sec "bench gemm new"
timeout 40 /tmp/new bench gemm -p 256,1024,4096,16384 -r 3 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
t "gemv"; sec "bench gemv new"
for g in "q4_k 17408 5120" "q4_k 5120 17408" "q6_k 5120 17408" "q6_k 248320 5120"; do set -- $g
  timeout 15 /tmp/new bench gemv --backend wgpu --quant $1 --rows $2 --cols $3 -r 100 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
done
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
