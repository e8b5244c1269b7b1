#!/bin/bash
# Device run 44: decode attention by teams of a subgroup's lanes (N = 2168cb1) against the kernel
# before it (E = 3bca35e, run 43's head) at depth 32768 first (the session had little more than
# a minute of device time left for this call once a machine started), then as time allows at
# 4096 and 32768 twice, N with f16 KV caches, N's decode profile after a 16384-token prompt. No
# llama.cpp: its build alone takes longer than the time left.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in E N; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
M=/dev/shm/m.gguf
[ -f $M ] || /tmp/N synth --preset qwen3.6-27b --quant q4_k_m -o $M > /tmp/synth.txt 2>&1
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
b() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LATEST:-430} ]; then sec "$name: not run (the call's time was up)"; return; fi; t "$name"; sec "$name"; timeout 120 "$@" >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R; }
D="-p 512 -n 128 -d 32768 -r 1"
b "bench N: $D" /tmp/N bench -m $M --backend wgpu $D
b "bench E: $D" /tmp/E bench -m $M --backend wgpu $D
D="-p 512 -n 128 -d 4096,32768 -r 2"
b "bench N --f16-kv-cache: $D" /tmp/N bench -m $M --backend wgpu --f16-kv-cache $D
b "bench N: $D" /tmp/N bench -m $M --backend wgpu $D
b "bench E: $D" /tmp/E bench -m $M --backend wgpu $D
b "bench N --profile -p 16384 -n 16 -r 1 (the decode profile at depth 16384)" /tmp/N bench -m $M --backend wgpu --profile -p 16384 -n 16 -r 1
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -40 > $OUT/stderr-summary.txt
t done
