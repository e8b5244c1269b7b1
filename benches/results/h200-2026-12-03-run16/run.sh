#!/bin/bash
# Device run 16: binary N (021a6d3 = the GEMV code of 78c94d5: two spans per round in rows_dot)
# against u4 (the same with four spans per round, four sums), decode of the 27B-shaped Q4_K_M
# file, alternating.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for b in N u4; do gunzip -c .bin/qwen35-$b.gz > /tmp/q$b; chmod +x /tmp/q$b; done
t "synth"; /tmp/qN synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
/tmp/qN bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for b in N u4 N u4; do
  t "bench $b"
  /tmp/q$b bench -m /dev/shm/m.gguf --backend wgpu -p 512 -n 128 -r 3 >> $OUT/bench-$b.txt 2>&1; grep -A1 "^backend" $OUT/bench-$b.txt | tail -1
done
t "check u4"; /tmp/qu4 check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check-u4.txt 2>&1; tail -3 $OUT/check-u4.txt
t done
