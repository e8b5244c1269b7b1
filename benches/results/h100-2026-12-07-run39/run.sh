#!/bin/bash
# Device run 39 (run 38's plan, which never ran, plus Q4_K decoded in the GEMM): split-K for the cooperative GEMM (+ the residual add in its epilogue) and the
# half-subgroup GEMV parts and Q6_K blocks padded to words (both opt-in), decode priced by leaving
# each op class out; llama.cpp b11434 CUDA beside if its build finishes in time (a short call:
# the device was scarce, so no base binary: --gemm-split-k 1 is the default and the A/B).
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in new wgpu_ops; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
mkdir -p /tmp/llama && tar -xJf .bin/llama-src.tar.xz -C /tmp/llama
(cd /tmp/llama/llama.cpp && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF && cmake --build /tmp/lb --target llama-bench -j14; echo BUILD_RC=\$?" > /tmp/llama-build.log 2>&1 < /dev/null &)
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
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt 440 ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 100 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
b "bench new: -p 512,1024,4096 -n 128 -r 2" /tmp/new bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2 --json $OUT/bench-new.json
b "bench new --gemm-split-k auto: -p 512,1024,4096 -n 16 -r 2" /tmp/new bench -m $M --backend wgpu --gemm-split-k auto -p 512,1024,4096 -n 16 -r 2
b "bench new --q4k-in-gemm: -p 512,1024,4096 -n 16 -r 2" /tmp/new bench -m $M --backend wgpu --q4k-in-gemm -p 512,1024,4096 -n 16 -r 2
b "bench new --q4k-in-gemm --gemm-split-k auto: -p 512,1024,4096 -n 16 -r 2" /tmp/new bench -m $M --backend wgpu --q4k-in-gemm --gemm-split-k auto -p 512,1024,4096 -n 16 -r 2
b "bench new --gemv-half-subgroups: -p 512 -n 128 -r 2" /tmp/new bench -m $M --backend wgpu --gemv-half-subgroups -p 512 -n 128 -r 2
b "bench new --q6-k-aligned: -p 512 -n 128 -r 2" /tmp/new bench -m $M --backend wgpu --q6-k-aligned -p 512 -n 128 -r 2
for c in "matmul q4_K" "matmul q6_K" "rms_norm" "delta_rule" "attention"; do
  b "bench new --leave-out '$c': -p 16 -n 128 -r 1" /tmp/new bench -m $M --backend wgpu --leave-out "$c" -p 16 -n 128 -r 1
done
t "llama.cpp's build"; tail -1 /tmp/llama-build.log | tee -a $R
if grep -q "BUILD_RC=0" /tmp/llama-build.log; then
  t "llama-bench"; sec "llama-bench -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2"
  timeout 80 /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2 >> $R 2>>/tmp/ll.err; echo "rc=$?" | tee -a $R
else
  sec "llama-bench: not run (its build had not finished)"
fi
cp /tmp/llama-build.log $OUT/ 2>/dev/null
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
tail -c 20000 /tmp/ll.err >> $OUT/stderr-summary.txt
cp /tmp/llama-build.log $OUT/ 2>/dev/null
t done
