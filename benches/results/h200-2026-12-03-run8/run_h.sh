#!/bin/bash
# Device run 8: qwen35 binary H (Q4_K GEMVs on 14-bit integer activations, dot4I8Packed) against
# the same binary with QWEN35_INTEGER_GEMV=0 (f32 activations, as run 7), GEMV microbench and
# decode on the 27B-shaped Q4_K_M file; then the tokenizer fuzz target on all cores.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
gunzip -c .bin/qwen35-H.gz > /tmp/q; chmod +x /tmp/q
t "synth"; /tmp/q synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "check"; /tmp/q check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; tail -4 $OUT/check.txt
t "gpu warm-up"; /tmp/q bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for shape in "17408 5120" "5120 17408" "10240 5120" "1024 5120"; do
  set -- $shape
  for int in 1 0; do
    t "gemv q4_k $1x$2 integer=$int"
    QWEN35_INTEGER_GEMV=$int /tmp/q bench gemv --backend wgpu --quant q4_k --rows $1 --cols $2 -r 1000 2>&1 | tee -a $OUT/gemv.txt | tail -4
  done
done
for int in 1 0; do
  t "qwen35 bench wgpu integer=$int"
  QWEN35_INTEGER_GEMV=$int /tmp/q bench -m /dev/shm/m.gguf --backend wgpu -p 512 -n 128 -r 3 --profile --json $OUT/bench-int$int.json > $OUT/bench-int$int.txt 2>&1
  head -6 $OUT/bench-int$int.txt; grep -A14 "profile wgpu, decode" $OUT/bench-int$int.txt
done
t "fuzz tokenizer"
mkdir -p /work && ln -sfn "$PWD" /work/main   # the target opens the fixture by its build path
mkdir -p /tmp/fb && gunzip -c .bin/fuzz/tokenizer.gz > /tmp/fb/tokenizer && chmod +x /tmp/fb/tokenizer
left=$(( 480 - ($(date +%s) - T0) ))
scripts/fuzz_all.sh -b /tmp/fb -w $(nproc) -n 10000000 -l 1024 -t $left tokenizer 2>&1 | tee $OUT/fuzz.txt
tar czf $OUT/fuzz-logs.tgz fuzz/logs fuzz/artifacts
t done
