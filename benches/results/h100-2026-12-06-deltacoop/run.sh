#!/bin/bash
# Device run of deltacoop (issue #18, build item 3): the chunked delta rule on cooperative
# matrices. One binary, .bin/deltacoop/qwen35.xz, and its wgpu_ops test binary,
# .bin/deltacoop/wgpu_ops.xz (stripped, xz), built from deltacoop 88f220d. The device tool sends
# the session's checkout (/work/main), not the helper's worktree, so this script and the binaries
# travelled in its git-ignored .bin/deltacoop/ (carry: .gl, .bin/deltacoop), run as
# `bash .bin/deltacoop/run.sh`; the fixtures are main's, the same files as here. The delta-rule
# tests first, check, bench with and without --no-cooperative-delta-rule (each with its profile
# pass), then the rest of wgpu_ops as time allows; every step bounded so that the call ends inside
# its 240 s.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 228 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in qwen35 wgpu_ops; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/deltacoop/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /work/wt && ln -sfn "$PWD" /work/wt/deltacoop
t "synth (in the background)"
(/tmp/qwen35 synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf > $OUT/synth.txt 2>&1; echo "synth rc=$?" >> $OUT/synth.txt) &
SYNTH=$!
export QWEN35_REQUIRE_GPU=1
t "wgpu_ops: delta tests"
timeout 60 /tmp/wgpu_ops --test-threads 1 delta > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
grep -E "^test |SKIP|worst|^test result|panicked" $OUT/wgpu_ops.txt | head -80
t "check"
timeout 45 /tmp/qwen35 check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; echo "rc=$?"
tail -4 $OUT/check.txt
wait $SYNTH; tail -1 $OUT/synth.txt
for mode in coop f32; do
  flag=""; [ $mode = f32 ] && flag=--no-cooperative-delta-rule
  t "bench $mode $flag"
  RUST_LOG=info timeout $(( $(left) < 60 ? $(left) : 60 )) /tmp/qwen35 bench -m /dev/shm/m.gguf --backend wgpu -p 512,4096 -n 8 -r 1 --profile $flag > $OUT/bench-$mode.txt 2> $OUT/bench-$mode.err
  echo "rc=$?"; grep -iE "cooperative|delta|rror" $OUT/bench-$mode.err | head -5; cat $OUT/bench-$mode.txt
done
t "wgpu_ops: the rest"
L=$(left); [ $L -gt 5 ] && timeout $L /tmp/wgpu_ops --test-threads 1 --skip delta >> $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
grep -E "^test result|FAILED|panicked" $OUT/wgpu_ops.txt | head -10
t done
