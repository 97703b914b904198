#!/usr/bin/env bash
# Cross-compiles the library and the specla program for aarch64 (64-bit Arm Linux) and runs them
# under qemu: the CLI test (tests/install/cli_test.sh, which includes flash-linear-attention's
# greedy tokens of a fixture) and a generation on the shipped model. Proves that the engine builds
# for a non-x86 target with no x86 flags and computes the same model there.
#
# Needs (Debian 12, as root):
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install g++-aarch64-linux-gnu qemu-user-static \
#       libpcre2-dev:arm64 libmimalloc-dev:arm64 nlohmann-json3-dev libcli11-dev
# --deps installs them first. Usage: tools/cross_check_aarch64.sh [--deps] [BUILD_DIR]
# (default build-aarch64 under the repository root).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
if [[ "${1:-}" == "--deps" ]]; then
    shift
    dpkg --add-architecture arm64
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++-aarch64-linux-gnu qemu-user-static \
        libpcre2-dev:arm64 libmimalloc-dev:arm64 nlohmann-json3-dev libcli11-dev
fi
BUILD=${1:-$SRC/build-aarch64}
TRIPLE=aarch64-linux-gnu
SYSROOT=/usr/$TRIPLE

die() {
    echo "FAIL: $*" >&2
    exit 1
}
step() { echo "== $*"; }

command -v $TRIPLE-g++ >/dev/null || die "no $TRIPLE-g++ (apt-get install g++-aarch64-linux-gnu, or run with --deps)"
[[ -f /usr/lib/$TRIPLE/pkgconfig/libpcre2-8.pc ]] || die "no arm64 PCRE2 (apt-get install libpcre2-dev:arm64)"
[[ -d /usr/lib/$TRIPLE/cmake/mimalloc ]] || die "no arm64 mimalloc (apt-get install libmimalloc-dev:arm64)"
QEMU=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)

step "configure $BUILD for $TRIPLE"
mkdir -p "$BUILD"
cmake -S "$SRC" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$SRC/cmake/toolchains/$TRIPLE.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DSPECLA_CUDA=OFF -DSPECLA_BUILD_TESTS=OFF -DSPECLA_BUILD_BENCH=OFF \
    -DSPECLA_BUILD_BINDINGS=OFF >"$BUILD/configure.log" 2>&1 \
    || { cat "$BUILD/configure.log"; die "configure failed"; }

step "build the library and the specla program"
cmake --build "$BUILD" -j"$(nproc)" --target specla specla_cli || die "the aarch64 build failed"
LIB=$(find "$BUILD" -maxdepth 1 -name 'libspecla.so.*.*' | head -n 1)
CLI="$BUILD/samples/specla"
for f in "$LIB" "$CLI"; do
    file -L "$f" | grep -q 'ARM aarch64' || die "$f is not an aarch64 binary: $(file -L "$f")"
done
# No x86 instruction-set flag reached any compile command.
X86_FLAGS='-m(avx|fma|f16c|sse|arch=x86)'
[[ -n "$(find "$BUILD" -name flags.make)" ]] || die "no flags.make under $BUILD to check"
if grep -rqE --include=flags.make -e "$X86_FLAGS" "$BUILD"; then
    die "x86 flags in the aarch64 compile commands: $(grep -rhoE --include=flags.make -e "$X86_FLAGS[^ ]*" "$BUILD" | sort -u | tr '\n' ' ')"
fi
echo "$(basename "$LIB"), samples/specla: aarch64, no x86 flags"

if [[ -z "$QEMU" ]]; then
    echo "qemu-aarch64 not found (apt-get install qemu-user-static): built, not run"
    exit 0
fi

step "generate on models/gdn-pycode-22m under qemu, one thread"
RUN="$BUILD/specla-under-qemu"
# A time limit: a hang under emulation must fail the check, not stall it.
# LD_LIBRARY_PATH: the dynamic loader comes from $SYSROOT (qemu's -L), and the C library must be
# the one built with it. Without it the loader also finds the arm64 multiarch libc
# (/lib/aarch64-linux-gnu, installed with libpcre2-dev:arm64), a different build of glibc whose
# private interface to the loader differs: pthread_create then spins forever before it clones,
# in any dynamically linked threaded program (a static one, or these two libraries from one
# package, run). That was the "hang with two threads".
printf '#!/bin/sh\nexec timeout 600 "%s" -L "%s" -E LD_LIBRARY_PATH="%s/lib" "%s" "$@"\n' \
    "$QEMU" "$SYSROOT" "$SYSROOT" "$CLI" >"$RUN"
chmod +x "$RUN"
OUT=$("$RUN" generate --model "$SRC/models/gdn-pycode-22m" --prompt 'def add(a, b):' --max-tokens 24 --quiet --threads 1) \
    || die "generation on the shipped model failed on aarch64"
printf '%s\n' "$OUT"
[[ "$OUT" == *return* ]] || die "the shipped model wrote no 'return' for add(a, b) on aarch64: '$OUT'"
step "two threads under qemu: the same tokens as one thread"
FIXTURE="$SRC/tests/fixtures/gdn_tiny_a"
ONE=$("$RUN" generate --model "$FIXTURE" --tokens 1,2,3 --max-tokens 16 --quiet --threads 1) \
    || die "generation on $FIXTURE with one thread failed on aarch64"
TWO=$("$RUN" generate --model "$FIXTURE" --tokens 1,2,3 --max-tokens 16 --quiet --threads 2) \
    || die "generation on $FIXTURE with two threads failed (or hung) on aarch64"
[[ "$ONE" == "$TWO" ]] || die "two threads give other tokens than one on aarch64: '$TWO' against '$ONE'"
echo "$TWO"
step "the CLI test under $(basename "$QEMU") (default threads)"
bash "$SRC/tests/install/cli_test.sh" "$RUN" "$SRC" || die "the CLI test fails on aarch64"

echo "aarch64 cross check: all checks passed"
