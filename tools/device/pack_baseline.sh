#!/usr/bin/env bash
# Run HERE: packs the engine-level benchmark drivers of a CUDA build made at the commit before a
# change, so that a device call can run them side by side with the new build
# (tools/device/run_on_device.sh ... baseline).
#
#   tools/device/pack_baseline.sh BUILD_DIR [COMMIT]
#
# BUILD_DIR holds bench/bench_decode and bench/bench_verify built with the CUDA backend for the
# device's architecture (they link the engine statically; cuBLAS comes from the device). Writes
# .deps/baseline/{bench_decode,bench_verify}.xz (stripped) and COMMIT.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:?usage: pack_baseline.sh BUILD_DIR [COMMIT]}"
out="$root/.deps/baseline"
rm -rf "$out"
mkdir -p "$out"
for p in bench_decode bench_verify; do
    src="$build/bench/$p"
    [ -x "$src" ] || src="$build/$p"
    [ -x "$src" ] || { echo "no $p under $build" >&2; exit 1; }
    strip -o "$out/$p" "$src"
    xz -9 -f "$out/$p"
done
echo "baseline: ${2:-unknown commit}" >"$out/COMMIT"
du -sh "$out"
