#!/bin/bash
# Device run 25: issue #18's first two prefill changes (head = main 0b6ea03 + gemm 7d7ffd1:
# conv_qkv_norm by row blocks, gemm_coop with 64-column steps, register prefetch and
# conflict-free tile stores) against 31cf351 (base, run 24's head) on the 27B-shaped Q4_K_M file:
# head's wgpu_ops tests and `check` (the new GEMM's numerics on tensor cores); bench of both at
# pp512/1024/4096 + tg128 (-r 3) and pp16384 (-r 1); a prefill profile of both at P=4096.
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
for v in head base; do
  t "bench $v"
  timeout 150 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024,4096 -n 128 -r 3 --json $OUT/bench-$v.json > $OUT/bench-$v.txt 2>$OUT/bench-$v.err
  echo "rc=$?"; grep -iE "cooperative|rror" $OUT/bench-$v.err | head -3; cat $OUT/bench-$v.txt
done
for v in head base; do
  t "profile $v P=4096"
  timeout 90 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 4096 -n 16 -r 1 --profile > $OUT/profile-$v.txt 2>&1
  echo "rc=$?"; grep -A8 "prefill (4096" $OUT/profile-$v.txt
done
for v in head base; do
  t "bench $v pp16384"
  timeout 100 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 16384 -n 1 -r 1 > $OUT/bench16k-$v.txt 2>&1
  echo "rc=$?"; tail -4 $OUT/bench16k-$v.txt
done
t done
