#!/bin/bash
# Device run 37: decode attention past 1024 cached rows aiming at 256 workgroups (new256) instead
# of 512 (new512, the head): at depth 32768 the 27B's 4 kv heads took 412 workgroups of 320 rows,
# more than one wave; 256 gives one wave of longer splits.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in new512 new256; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
/tmp/new512 synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf > /tmp/synth.txt 2>&1; echo SYNTH_RC=$?
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
M=/dev/shm/m.gguf
b() { local name=$1; shift; t "$name"; sec "$name"; timeout 80 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
b "bench new512: -p 512 -n 128 -d 4096,32768 -r 1" /tmp/new512 bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1
b "bench new256: -p 512 -n 128 -d 4096,32768 -r 1" /tmp/new256 bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
t done
