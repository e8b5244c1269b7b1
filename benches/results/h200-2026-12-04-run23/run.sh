#!/bin/bash
# Device run 23: the restructure branch's binary (head) against main's a702e4a (base) on the
# 27B-shaped Q4_K_M file: the wgpu_ops tests and `check` of head, an A/B of prefill and decode
# (`bench -p 512,1024 -n 128 -r 3`, two rounds), and head's `qwen35 run --temp 0 / 0.7 -n 256`
# (no --backend: the fastest backend is chosen) against bench's tg in the same call; base's
# `run --backend wgpu` for the before figures.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in base head wgpu_ops; do gunzip -c .bin/$v.gz > /tmp/$v; chmod +x /tmp/$v; done
git log -1 --format='tree at %h %s' 2>/dev/null | cut -c1-100
t "synth"; /tmp/head synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "wgpu_ops tests of head"; mkdir -p /work/wt; ln -sfn "$PWD" /work/wt/restructure
QWEN35_REQUIRE_GPU=1 timeout 150 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?"
grep -E "^test result|FAILED|panicked" $OUT/wgpu_ops.txt | head -5
t "check head"; timeout 90 /tmp/head check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; echo "rc=$?"
tail -8 $OUT/check.txt
P="The capital of France is"
run() { # binary, temperature, backend flags
  timeout 60 /tmp/$1 run -m /dev/shm/m.gguf $3 --temp $2 --seed 1 -n 256 -p "$P" 2>/tmp/r.err >/dev/null
  echo "rc=$?"; grep -E "^backend:|decode .* tokens|rror" /tmp/r.err | tail -3
}
for round in 1 2; do
  for v in base head; do
    t "bench $v round $round"
    timeout 100 /tmp/$v bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024 -n 128 -r 3 2>/tmp/b.err
    echo "rc=$?"; tail -2 /tmp/b.err
  done
  for temp in 0 0.7; do t "run head --temp $temp round $round"; run head $temp ""; done
done
for temp in 0 0.7; do t "run base --backend wgpu --temp $temp"; run base $temp "--backend wgpu"; done
t done
