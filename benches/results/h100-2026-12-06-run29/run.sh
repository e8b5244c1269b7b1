#!/bin/bash
# Device run 29: main 8910fcb (gemm_coop_blocked behind --gemm-tile, merged) on the GPU: the blocked GEMM's
# test on the tensor cores (and once with a planted defect), bench gemm per tile, prefill per tile, and the
# routed decode attention (per head to 1024 rows, kv head past) at depth, with a decode profile.
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export WGPU_BACKEND=vulkan
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD
for v in new wgpu_ops wgpu_ops_planted; do
  python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open('.bin/$v.xz').read())" > /tmp/$v; chmod +x /tmp/$v
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
(/tmp/new synth --preset qwen3.6-27b --quant q4_k_m -o /dev/shm/m.gguf > /tmp/synth.txt 2>&1; echo SYNTH_RC=$? >> /tmp/synth.txt) &
SYNTH=$!
R=$OUT/results.txt
sec() { echo; echo "=== $*"; } >> $R
[ "$PWD" = /work/main ] || { mkdir -p /work; ln -sfn "$PWD" /work/main; }
t "check"; sec "check new"
QWEN35_REQUIRE_GPU=1 timeout 60 /tmp/new check --fixtures tests/fixtures --backend cpu,wgpu >> $R 2>&1; echo "rc=$?" | tee -a $R
t "wgpu_ops"; sec "wgpu_ops (QWEN35_REQUIRE_COOPERATIVE=1)"
QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1 timeout 150 /tmp/wgpu_ops --test-threads 1 > $OUT/wgpu_ops.txt 2>&1; echo "rc=$?" | tee -a $R
grep -E "^test result|FAILED|panicked|SKIP" $OUT/wgpu_ops.txt | head -12 | tee -a $R
t "wgpu_ops planted"; sec "wgpu_ops_planted blocked test (group_width = GROUP_TOKEN_TILES planted: must FAIL)"
QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1 timeout 60 /tmp/wgpu_ops_planted --test-threads 1 blocked_cooperative_gemm > /tmp/planted.txt 2>&1; echo "rc=$?" | tee -a $R
grep -E "^test |^test result|panicked" /tmp/planted.txt | head -6 | tee -a $R
t "gemm"
for tile in "" 64x128 128x64 128x128; do
  sec "bench gemm -p 256,1024,4096,16384 -r 3 ${tile:+--gemm-tile $tile}"
  RUST_LOG=qwen35=info timeout 60 /tmp/new bench gemm -p 256,1024,4096,16384 -r 3 ${tile:+--gemm-tile $tile} >> $R 2>/tmp/gemm.err; echo "rc=$?" | tee -a $R
  grep -iE "cooperative|warn|error" /tmp/gemm.err | sort | uniq -c | head -4 | tee -a $R
done
t "synth wait"; wait $SYNTH; tail -1 /tmp/synth.txt
M=/dev/shm/m.gguf
for tile in "" 64x128 128x64 128x128; do
  t "prefill $tile"; sec "bench -p 512,1024,4096 -n 16 -r 1 ${tile:+--gemm-tile $tile}"
  timeout 60 /tmp/new bench -m $M --backend wgpu -p 512,1024,4096 -n 16 -r 1 ${tile:+--gemm-tile $tile} >> $R 2>/tmp/q.err; echo "rc=$?" | tee -a $R
done
t "pp16384"; sec "bench -p 16384 -n 1 -r 1 (default, then 128x128)"
timeout 40 /tmp/new bench -m $M --backend wgpu -p 16384 -n 1 -r 1 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
timeout 40 /tmp/new bench -m $M --backend wgpu -p 16384 -n 1 -r 1 --gemm-tile 128x128 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
t "depth"; sec "bench -p 512 -n 128 -d 4096,32768 -r 1"
timeout 90 /tmp/new bench -m $M --backend wgpu -p 512 -n 128 -d 4096,32768 -r 1 >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
t "profile"; sec "bench -p 512 -n 32 -r 1 --profile"
timeout 60 /tmp/new bench -m $M --backend wgpu -p 512 -n 32 -r 1 --profile >> $R 2>>/tmp/q.err; echo "rc=$?" | tee -a $R
grep -iE "error|warn|fail" /tmp/q.err | sort | uniq -c | head -20 > $OUT/stderr-summary.txt
t done
