#!/bin/bash
# Device run 13: the span GEMVs' shape, rows per workgroup (ROWS, GEMV_ROWS) × invocations per
# workgroup, swept on binary M (78c94d5, 2 rows × 32) and builds of it that differ only in those two
# constants: r1w32, r4w32, r8w32, r2w64, r4w64. GEMV microbenchmarks and decode of the 27B-shaped
# Q4_K_M file.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
VARIANTS="M r1w32 r4w32 r8w32 r2w64 r4w64"
for b in $VARIANTS; do gunzip -c .bin/qwen35-$b.gz > /tmp/q$b; chmod +x /tmp/q$b; done
t "synth"; /tmp/qM synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "gpu warm-up"; /tmp/qM bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for b in $VARIANTS; do
  for shape in "q4_k 17408 5120" "q4_k 5120 17408" "q6_k 5120 17408" "q4_k 1024 5120"; do
    set -- $shape
    echo "== $b gemv $1 rows $2 cols $3" >> $OUT/gemv.txt
    /tmp/q$b bench gemv --backend wgpu --quant $1 --rows $2 --cols $3 -r 400 >> $OUT/gemv.txt 2>&1
  done
  t "bench $b"
  /tmp/q$b bench -m /dev/shm/m.gguf --backend wgpu -p 512 -n 128 -r 3 >> $OUT/bench-$b.txt 2>&1; grep -A1 "^backend" $OUT/bench-$b.txt | tail -1
done
grep -E "^==|GB/s" $OUT/gemv.txt | head -80
t done
