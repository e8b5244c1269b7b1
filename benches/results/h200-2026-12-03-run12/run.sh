#!/bin/bash
# Device run 12: binary L (7fd8482) against binary M (the projections of one input that share a
# format in one several-weight GEMV dispatch), decode on the 27B-shaped Q4_K_M file, back to
# back; M also profiled.
cd "$(dirname "$0")/../../.."
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for b in L M; do gunzip -c .bin/qwen35-$b.gz > /tmp/q$b; chmod +x /tmp/q$b; done
t "synth"; /tmp/qM synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf 2>&1 | tail -1
t "check"; /tmp/qM check --fixtures tests/fixtures --backend cpu,wgpu > $OUT/check.txt 2>&1; tail -3 $OUT/check.txt
t "gpu warm-up"; /tmp/qM bench gemv --backend wgpu --quant q4_k --rows 17408 --cols 5120 -r 2000 > /dev/null 2>&1
for b in L M L M; do
  t "bench $b"
  /tmp/q$b bench -m /dev/shm/m.gguf --backend wgpu -p 512 -n 128 -r 3 >> $OUT/bench-$b.txt 2>&1; grep -A1 "^backend" $OUT/bench-$b.txt | tail -1
done
t "bench M profiled"
/tmp/qM bench -m /dev/shm/m.gguf --backend wgpu -p 512 -n 128 -r 3 --profile > $OUT/bench-M-profile.txt 2>&1
grep -A16 "profile wgpu, decode" $OUT/bench-M-profile.txt
t done
