#!/bin/bash
# Device run 14: rows split between parts of a GEMV workgroup's invocations. Binary N = 021a6d3
# (ROWS 2, LANE_ROWS 2: one part), and builds of it that differ only in ROWS/GEMV_ROWS and
# LANE_ROWS: s2 (4, 2: two parts of 16 invocations), s4 (8, 2: four parts of 8), s2l1 (2, 1).
# GEMV microbenchmarks (each binary warmed up first) and decode of the 27B-shaped Q4_K_M file.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
VARIANTS="N s2 s4 s2l1"
for b in $VARIANTS; do gunzip -c .bin/qwen35-$b.gz > /tmp/q$b; chmod +x /tmp/q$b; done
t "synth"; /tmp/qN synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
for b in $VARIANTS; do
  /tmp/q$b bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
  for shape in "q4_k 17408 5120" "q4_k 5120 17408" "q6_k 5120 17408" "q6_k 10240 5120" "q4_k 1024 5120"; do
    set -- $shape
    echo "== $b gemv $1 rows $2 cols $3" >> $OUT/gemv.txt
    /tmp/q$b bench gemv --backend wgpu --quant $1 --rows $2 --cols $3 -r 400 >> $OUT/gemv.txt 2>&1
  done
  t "bench $b"
  /tmp/q$b bench -m /dev/shm/m.gguf --backend wgpu -p 512 -n 128 -r 3 >> $OUT/bench-$b.txt 2>&1; grep -A1 "^backend" $OUT/bench-$b.txt | tail -1
done
t "check s2"; /tmp/qs2 check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check-s2.txt 2>&1; tail -3 $OUT/check-s2.txt
grep -E "^==|back to back" $OUT/gemv.txt | paste - - | awk '{print $2, $4, $6, $8, "|", $(NF-1), $NF}'
t done
