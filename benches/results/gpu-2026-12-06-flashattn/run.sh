#!/bin/bash
# Device run of branch flashattn (issue #18 item 2: prefill attention on cooperative matrices), one
# binary on the 27B-shaped Q4_K_M file, cooperative attention on (default) and off
# (--no-cooperative-attention): wgpu_ops' attention tests (cooperative required), the same test
# built with the causal mask dropped (must fail), check, bench pp512/4096, a P=4096 profile of
# both, the whole wgpu_ops binary, and pp16384 where time is left.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in qwen35 wgpu_ops wgpu_ops_planted; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
(/tmp/qwen35 synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf > /tmp/synth.txt 2>&1; echo SYNTH_RC=$? >> /tmp/synth.txt) &
mkdir -p /work/wt; [ "$PWD" = /work/wt/flashattn ] || ln -sfn "$PWD" /work/wt/flashattn
export QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1
t "wgpu_ops attention tests"
timeout 60 /tmp/wgpu_ops --test-threads 1 attention > $OUT/wgpu_ops-attention.txt 2>&1; echo "rc=$?"
grep -E "^test |^test result|NOTICE|panicked" $OUT/wgpu_ops-attention.txt | head -12
t "planted: causal mask dropped (must FAIL)"
timeout 30 /tmp/wgpu_ops_planted --test-threads 1 cooperative_attention > /tmp/planted.txt 2>&1; echo "rc=$?"
grep -E "^test |^test result|panicked|cooperative attention" /tmp/planted.txt | head -6
t "check"
timeout 40 /tmp/qwen35 check --fixtures tests/fixtures --backend cpu,wgpu > /tmp/check.txt 2>&1; echo "rc=$?"
cat /tmp/check.txt
t "waiting for synth"; wait; tail -2 /tmp/synth.txt
for mode in coop f32; do
  flag=; [ $mode = f32 ] && flag=--no-cooperative-attention
  t "bench $mode"
  RUST_LOG=info timeout 60 /tmp/qwen35 bench -m /dev/shm/m.gguf --backend wgpu -p 512,4096 -n 8 -r 1 $flag > $OUT/bench-$mode.txt 2> /tmp/bench-$mode.err
  echo "rc=$?"; grep -iE "cooperative|rror" /tmp/bench-$mode.err | head -4; cat $OUT/bench-$mode.txt
done
for mode in coop f32; do
  flag=; [ $mode = f32 ] && flag=--no-cooperative-attention
  left 175 || break
  t "profile $mode P=4096"
  timeout 40 /tmp/qwen35 bench -m /dev/shm/m.gguf --backend wgpu -p 4096 -n 1 -r 1 --profile $flag > $OUT/profile-$mode.txt 2>&1
  echo "rc=$?"; grep -A8 "prefill (4096" $OUT/profile-$mode.txt
done
if left 200; then
  t "whole wgpu_ops"
  timeout 35 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
  grep -E "^test result|FAILED|panicked|NOTICE" $OUT/wgpu_ops.txt | head -8
fi
for mode in coop f32; do
  flag=; [ $mode = f32 ] && flag=--no-cooperative-attention
  left 195 || break
  t "bench $mode pp16384"
  timeout $(( 232 - ($(date +%s) - T0) )) /tmp/qwen35 bench -m /dev/shm/m.gguf --backend wgpu -p 16384 -n 1 -r 1 $flag > /tmp/bench16k-$mode.txt 2>&1
  echo "rc=$?"; tail -3 /tmp/bench16k-$mode.txt
done
t done
