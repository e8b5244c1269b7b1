#!/bin/bash
# Device run 43 (not yet run): the head (E: the prefill SwiGLU computed as the down projection's
# input is converted to f16, 25512e5) against base = 735bef1 (run 42's code) in one call, two
# rounds (round 1 while llama.cpp builds, round 2 after), llama-bench b11434 CUDA beside; "F" = E
# with 40 GB of f16 weight copies kept for the prefill GEMM (--f16-weight-copies; all of the
# 27B's, 49 GB, ran the H100 out of memory in run 42); "T" = E with the GEMM in tiles of 64 tokens
# (--gemm-token-tile 64); check on E, F and T; profiles; decode at depth 4096/32768 for both
# engines if the call's time allows (E restores the filled state before the timer starts: until
# now the depth rows also timed the upload of the restored KV cache, 4.3 GB at depth 32768), and a
# decode profile after a 16384-token prompt.
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
if [ ! -x /tmp/lb/bin/llama-bench ]; then
  mkdir -p /tmp/llama && tar -xJf .bin/llama-src.tar.xz -C /tmp/llama
  (cd /tmp/llama/llama.cpp && setsid nohup bash -c "cmake -S . -B /tmp/lb -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF && cmake --build /tmp/lb --target llama-bench -j12; echo BUILD_RC=\$?" > /tmp/llama-build.log 2>&1 < /dev/null &)
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
M=/dev/shm/m.gguf
C="--f16-weight-copies 40000000000"
[ -f $M ] || /tmp/E synth --preset qwen3.6-27b --quant q4_k_m -o $M > /tmp/synth.txt 2>&1
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
t "check"; sec "check E"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/E check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
sec "check T --gemm-token-tile 64"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/E check --fixtures tests/fixtures --backend cpu,wgpu --gemm-token-tile 64 >> $R 2>&1; echo "rc=$?" | tee -a $R
sec "check F $C"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/E check --fixtures tests/fixtures --backend cpu,wgpu $C >> $R 2>&1; echo "rc=$?" | tee -a $R
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LATEST:-420} ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 100 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
for v in base E; do
  b "bench $v (round 1, llama.cpp building beside): -p 512,1024,4096 -n 128 -r 2" /tmp/$v bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2
done
b "bench T --gemm-token-tile 64 (round 1): -p 512,1024,4096 -n 16 -r 2" /tmp/E bench -m $M --backend wgpu --gemm-token-tile 64 -p 512,1024,4096 -n 16 -r 2
b "bench F $C (round 1): -p 512,1024,4096 -n 128 -r 2" /tmp/E bench -m $M --backend wgpu $C -p 512,1024,4096 -n 128 -r 2
t "llama.cpp's build"; for i in $(seq 60); do grep -q BUILD_RC /tmp/llama-build.log 2>/dev/null && break; [ -x /tmp/lb/bin/llama-bench ] && break; sleep 5; done
tail -1 /tmp/llama-build.log | tee -a $R
if [ -x /tmp/lb/bin/llama-bench ]; then
  b "llama-bench -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2
else
  sec "llama-bench: not run (its build had not finished)"
fi
b "bench F $C --profile -p 512 -n 16" /tmp/E bench -m $M --backend wgpu $C --profile -p 512 -n 16 -r 1
b "bench E --profile -p 512 -n 16" /tmp/E bench -m $M --backend wgpu --profile -p 512 -n 16 -r 1
b "bench T --gemm-token-tile 64 (round 2): -p 512,1024,4096 -n 16 -r 2" /tmp/E bench -m $M --backend wgpu --gemm-token-tile 64 -p 512,1024,4096 -n 16 -r 2
b "bench F $C (round 2): -p 512,1024,4096 -n 128 -r 2" /tmp/E bench -m $M --backend wgpu $C -p 512,1024,4096 -n 128 -r 2
for v in E base; do
  b "bench $v (round 2): -p 512,1024,4096 -n 128 -r 2" /tmp/$v bench -m $M --backend wgpu -p 512,1024,4096 -n 128 -r 2
done
LATEST=470 b "bench E -p 512 -n 128 -d 4096,32768 -r 1" /tmp/E bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1
[ -x /tmp/lb/bin/llama-bench ] && LATEST=500 b "llama-bench -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1
LATEST=520 b "bench E --profile -p 16384 -n 16 -r 1 (the decode profile at depth 16384)" /tmp/E bench -m $M --backend wgpu --profile -p 16384 -n 16 -r 1
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
cp /tmp/llama-build.log $OUT/ 2>/dev/null
t done
