#!/bin/bash
# Device run 25: issue #18's first prefill changes, two binaries on the 27B-shaped Q4_K_M file:
#   head = main 3f60aff (conv_qkv_norm by 16-row blocks, bench gemm), gemm = head + the GEMM patch
#   (64-column steps, register prefetch, conflict-free tile stores). (31cf351, run 24's head, does
#   not fit the 64 MiB the device call carries beside the tree and llama.cpp's sources.)
# gemm's wgpu_ops tests and `check` (its numerics on tensor cores), check of head, bench gemm of head
# and gemm (the 27B shapes, P = 256..16384), bench of both at pp512/1024/4096 + tg128 (-r 3),
# llama.cpp b11434 CUDA (built here from the PyPI sdist's tree, .bin/llama-src.tar.xz) with
# llama-bench on the same file, a P=4096 prefill profile of head and gemm, and pp16384 of head and gemm.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in head gemm wgpu_ops; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
# llama.cpp builds on 10 of the 16 cores while the tests and microbenchmarks run.
mkdir -p /tmp/llama && tar -xJf .bin/llama-src.tar.xz -C /tmp/llama
(cd /tmp/llama/llama.cpp && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/lb -j10 --target llama-bench; echo BUILD_RC=\$?" > $OUT/llama-build.log 2>&1 < /dev/null &)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
t "synth"; /tmp/head synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "wgpu_ops tests of gemm"
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
QWEN35_REQUIRE_GPU=1 timeout 120 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
grep -E "^test result|FAILED|panicked" $OUT/wgpu_ops.txt | head -5
for v in gemm head; do
  t "check $v"; QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/$v check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check-$v.txt 2>&1; echo "rc=$?"
  tail -3 $OUT/check-$v.txt
done
for v in head gemm; do
  t "bench gemm $v"
  timeout 90 /tmp/$v bench gemm -p 256,1024,4096,16384 -r 3 --json $OUT/gemm-$v.json > $OUT/gemm-$v.txt 2>$OUT/gemm-$v.err
  echo "rc=$?"; tail -2 $OUT/gemm-$v.err; cat $OUT/gemm-$v.txt
done
for v in head gemm; do
  t "bench $v"
  timeout 150 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024,4096 -n 128 -r 3 --json $OUT/bench-$v.json > $OUT/bench-$v.txt 2>$OUT/bench-$v.err
  echo "rc=$?"; grep -iE "cooperative|rror" $OUT/bench-$v.err | head -3; cat $OUT/bench-$v.txt
done
t "waiting for llama.cpp's build"
for i in $(seq 1 200); do grep -q BUILD_RC $OUT/llama-build.log && break; sleep 2; done
tail -1 $OUT/llama-build.log
t "llama-bench"
timeout 150 /tmp/lb/bin/llama-bench -m /dev/shm/m.gguf -ngl 99 -fa 1 -p 512,1024,4096,16384 -n 128 -r 3 > $OUT/llama-bench.txt 2>&1; echo "rc=$?"
grep -E "^\|" $OUT/llama-bench.txt
for v in head gemm; do
  t "profile $v P=4096"
  timeout 60 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 4096 -n 16 -r 1 --profile > $OUT/profile-$v.txt 2>&1
  echo "rc=$?"; grep -A12 "prefill (4096" $OUT/profile-$v.txt
done
for v in gemm head; do
  t "bench $v pp16384"
  timeout 70 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 16384 -n 1 -r 1 > $OUT/bench16k-$v.txt 2>&1
  echo "rc=$?"; tail -4 $OUT/bench16k-$v.txt
done
t done
