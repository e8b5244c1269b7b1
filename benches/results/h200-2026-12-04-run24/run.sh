#!/bin/bash
# Device run 24: main after the restructure/serve/convert merges (head) against a702e4a (base,
# the binary of issue #17's before figures) on the 27B-shaped Q4_K_M file: head's wgpu_ops
# tests and `check`; bench of both (`-p 512,1024 -n 128 -r 3`; head's table has the run-path
# rows); `qwen35 run --temp 0 / 0.7 --seed 1 -n 256` of head with no --backend (the fastest
# backend is chosen and named) and of base with --backend wgpu; head's `bench ttft` on wgpu.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in base head wgpu_ops; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
t "synth"; /tmp/head synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "wgpu_ops tests of head"
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
QWEN35_REQUIRE_GPU=1 timeout 120 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
grep -E "^test result|FAILED|panicked" $OUT/wgpu_ops.txt | head -5
t "check head"; QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/head check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; echo "rc=$?"
tail -4 $OUT/check.txt
P="The capital of France is"
run() { # binary, temperature, backend flags
  timeout 60 /tmp/$1 run -m /dev/shm/m.gguf $3 --temp $2 --seed 1 -n 256 -p "$P" 2>/tmp/r.err >/dev/null
  echo "rc=$?"; grep -E "^backend:|decode .* tokens|rror" /tmp/r.err | tail -3
}
for v in head base; do
  t "bench $v"
  timeout 110 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024 -n 128 -r 3 --json $OUT/bench-$v.json > $OUT/bench-$v.txt 2>/tmp/b.err
  echo "rc=$?"; tail -2 /tmp/b.err; cat $OUT/bench-$v.txt
done
for temp in 0 0.7; do t "run head --temp $temp (no --backend)"; run head $temp ""; done
for temp in 0 0.7; do t "run base --backend wgpu --temp $temp"; run base $temp "--backend wgpu"; done
t "bench ttft head"
timeout 90 /tmp/head bench ttft -m /dev/shm/m.gguf --backend wgpu --system-tokens 4096 --question-tokens 32 -r 2 > $OUT/ttft.txt 2>&1; echo "rc=$?"; cat $OUT/ttft.txt | tail -6
t done
