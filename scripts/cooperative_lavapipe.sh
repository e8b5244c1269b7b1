#!/usr/bin/env bash
# Runs a command (`cargo test …`, `cargo run … -- check`) with Mesa's lavapipe from Debian sid,
# whose Vulkan driver has cooperative matrices (8×8×8 f16 → f32 blocks, Mesa 26.2 on), so that the
# kernels on cooperative matrices (the prefill GEMM and attention) run on a CPU. Debian 12's
# Mesa (22.3) and 13's (25.0) do not have them, and sid's driver needs sid's C library, so a
# minimal sid root is bootstrapped under target/ (about 600 MB, once) and the command's programs
# run through that root's dynamic loader: cargo takes it as the target runner. The tests are
# told to fail, not skip, where the cooperative kernels do not run (QWEN35_REQUIRE_COOPERATIVE).
#
#   scripts/cooperative_lavapipe.sh cargo test --release --locked --test wgpu_ops
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD/target/mesa-sid"
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "cooperative_lavapipe.sh: bootstrapping $ROOT needs root or sudo" >&2
        exit 1
    fi
}

if [ ! -e "$ROOT/.complete" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    fi
    as_root rm -rf "$ROOT"
    as_root debootstrap --variant=minbase --include=mesa-vulkan-drivers,libvulkan1 \
        sid "$ROOT" "$MIRROR" > target/mesa-sid.log 2>&1 \
        || { tail -20 target/mesa-sid.log >&2; exit 1; }
    as_root touch "$ROOT/.complete"
fi

LIBS="$ROOT/usr/lib/x86_64-linux-gnu"
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$ROOT/usr/lib64/ld-linux-x86-64.so.2 --library-path $LIBS"
export VK_DRIVER_FILES="$ROOT/usr/share/vulkan/icd.d/lvp_icd.json"
export QWEN35_REQUIRE_GPU=1 QWEN35_REQUIRE_COOPERATIVE=1
echo "cooperative_lavapipe.sh: Mesa $(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${Version}' mesa-vulkan-drivers) from sid" >&2
exec "$@"
