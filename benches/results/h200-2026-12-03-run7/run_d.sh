#!/bin/bash
# Device run 7: qwen35 binary G (the norm computed once per normed input, plain GEMVs) on the
# 27B-shaped Q4_K_M file (llama.cpp's figures on this file: run 6), then the tokenizer fuzz
# target on all cores for the rest of the call.
cd "$(dirname "$0")/.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
gunzip -c .bin/qwen35-G.gz > /tmp/q; chmod +x /tmp/q
t "synth"; /tmp/q synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "check"; /tmp/q check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; tail -6 $OUT/check.txt
t "gpu warm-up"; /tmp/q bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
t "qwen35 bench wgpu"
/tmp/q bench -m /dev/shm/m.gguf --backend wgpu -p 512,1024 -n 128 -r 3 --profile --json $OUT/bench.json > $OUT/bench.txt 2>&1; head -6 $OUT/bench.txt; grep -A12 "profile wgpu, decode" $OUT/bench.txt
t "fuzz tokenizer"
mkdir -p /work && ln -sfn "$PWD" /work/main   # the target opens the fixture by its build path
mkdir -p /tmp/fb && gunzip -c .bin/fuzz/tokenizer.gz > /tmp/fb/tokenizer && chmod +x /tmp/fb/tokenizer
left=$(( 330 - ($(date +%s) - T0) ))
scripts/fuzz_all.sh -b /tmp/fb -w $(nproc) -n 10000000 -l 1024 -t $left tokenizer 2>&1 | tee $OUT/fuzz.txt
tar czf $OUT/fuzz-logs.tgz fuzz/logs fuzz/artifacts
t done
