#!/bin/bash
# Device run 45 (it got an H100; the directory was named for the H200 it asked for, then renamed): E = 62bb54c (f16 weight copies by default where the Vulkan driver reports room:
# --f16-weight-copies auto), its old default beside (E --f16-weight-copies 0); G = E + the prefill
# GEMM fetching four halves a load as f16 (no unpack/convert in the staging); N = E + the team
# decode attention (2168cb1 re-applied) at depth 4096/32768, also with f16 KV caches; check on G
# and N; llama.cpp b11434 CUDA built from the PyPI sdist beside, pp512/1024/4096/16384, tg128 and
# depth; two rounds of the prefill A/B; G's prefill profile and `bench gemm`.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
# The three binaries in one solid archive (they share most bytes; the tree's 64 MiB allow it).
tar -xJf .bin/bins.tar.xz -C /tmp && chmod +x /tmp/E /tmp/G /tmp/N
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
for v in G N; do
  t "check $v"; sec "check $v"
  QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/$v check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
done
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LATEST:-500} ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 100 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
P="-p 512,1024,4096 -n 128 -r 2"
D="-p 512 -n 128 -d 4096,32768 -r 1"
b "bench E --f16-weight-copies 0 (the old default; round 1, llama.cpp building beside): $P" /tmp/E bench -m $M --backend wgpu --f16-weight-copies 0 $P
t "bench E auto (round 1), its log"; sec "bench E (auto copies; round 1): $P"
RUST_LOG=qwen35::backend=info timeout 100 /tmp/E bench -m $M --backend wgpu $P >> $R 2> $OUT/e-auto-stderr.txt; echo "rc=$?" | tee -a $R
grep -iE "memory|copies" $OUT/e-auto-stderr.txt | head -20 | tee -a $R
b "bench G (round 1): $P" /tmp/G bench -m $M --backend wgpu $P
b "bench N: $D" /tmp/N bench -m $M --backend wgpu $D
b "bench E: $D" /tmp/E bench -m $M --backend wgpu $D
b "bench N --f16-kv-cache: $D" /tmp/N bench -m $M --backend wgpu --f16-kv-cache $D
b "bench G -p 16384 -n 16 -r 1" /tmp/G bench -m $M --backend wgpu -p 16384 -n 16 -r 1
t "llama.cpp's build"; for i in $(seq 60); do grep -q BUILD_RC /tmp/llama-build.log 2>/dev/null && break; sleep 5; done
tail -1 /tmp/llama-build.log | tee -a $R
if [ -x /tmp/lb/bin/llama-bench ]; then
  b "llama-bench -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 512,1024,4096 -n 128 -r 2
  b "llama-bench -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 0 -n 128 -d 4096,32768 -r 1
  b "llama-bench -ngl 99 -fa 1 -p 16384 -n 0 -r 1" /tmp/lb/bin/llama-bench -m $M -ngl 99 -fa 1 -p 16384 -n 0 -r 1
else
  sec "llama-bench: not run (its build had not finished)"
fi
b "bench G (round 2): $P" /tmp/G bench -m $M --backend wgpu $P
b "bench E (auto copies; round 2): $P" /tmp/E bench -m $M --backend wgpu $P
b "bench E --f16-weight-copies 0 (round 2): $P" /tmp/E bench -m $M --backend wgpu --f16-weight-copies 0 $P
b "bench G --profile -p 512 -n 16 -r 1" /tmp/G bench -m $M --backend wgpu --profile -p 512 -n 16 -r 1
LATEST=520 b "bench gemm G -p 512,4096" /tmp/G bench gemm --backend wgpu -p 512,4096
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
tail -5 /tmp/llama-build.log > $OUT/llama-build-tail.txt 2>/dev/null
t done
