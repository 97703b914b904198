#!/usr/bin/env bash
# Run HERE, after building the CUDA configuration: packs programs for a device call that runs them
# without building there (tools/device/run_on_device.sh prebuilt ...).
#
#   tools/device/pack_prebuilt.sh [BUILD_DIR] [PROGRAM ...]
#     BUILD_DIR  default build-cuda
#     PROGRAM    default: specla_internal_tests bench_decode specla_api_tests libspecla.so.3
#                (also known: bench_verify bench_generate; from a build configured with
#                -DSPECLA_BUILD_EXPERIMENTS=ON: bench_step_floor bench_persistent_step
#                specla_experiment_tests)
#
# Each program is stripped and compressed into .deps/prebuilt/NAME.xz (the folder is emptied
# first); the run-time libraries the device lacks (mimalloc, PCRE2 8-bit) are copied from
# .deps/debs (tools/device/fetch_debs.sh) into .deps/debs-runtime. A device call carries the
# working tree's tracked files plus what it names, 64 MiB in all; with the model and fixtures the
# tracked files take most of that, so a prebuilt run carries .deps/prebuilt and
# .deps/debs-runtime, not the headers and development packages of .deps/debs. The script prints
# the total against that limit.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-build-cuda}"
[ $# -gt 0 ] && shift
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(specla_internal_tests bench_decode specla_api_tests libspecla.so.3)
case "$build" in /*) ;; *) build="$root/$build" ;; esac

where() {  # the built file of a program
    case "$1" in
        specla_internal_tests | specla_api_tests) echo "$build/tests/$1" ;;
        bench_step_floor | bench_persistent_step | specla_experiment_tests) echo "$build/bench/experiments/$1" ;;
        bench_*) echo "$build/bench/$1" ;;
        libspecla.so.3) readlink -f "$build/libspecla.so.3" ;;
        *) echo "unknown program: $1" >&2; return 1 ;;
    esac
}

out="$root/.deps/prebuilt"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
rm -f "$out"/*
for p in "${programs[@]}"; do
    src="$(where "$p")"
    [ -f "$src" ] || { echo "not built: $src" >&2; exit 1; }
    cp "$src" "$tmp/$p"
    strip "$tmp/$p"
    xz -T0 -9e -c "$tmp/$p" >"$out/$p.xz"
done

rt="$root/.deps/debs-runtime"
mkdir -p "$rt"
rm -f "$rt"/*.deb
for d in "$root"/.deps/debs/libmimalloc2.0_*.deb "$root"/.deps/debs/libpcre2-8-0_*.deb; do
    [ -e "$d" ] && cp "$d" "$rt/"
done
ls "$rt"/*.deb >/dev/null 2>&1 || echo "warning: no run-time .deb files (run tools/device/fetch_debs.sh)" >&2

cd "$root"
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(du -cb "$out" "$rt" | tail -1 | cut -f1)
limit=$((64 * 1024 * 1024))
ls -la "$out"
printf 'tracked files %.1f MiB + carried %.1f MiB = %.1f MiB of %d MiB\n' \
    "$(echo "$tracked / 1048576" | bc -l)" "$(echo "$carried / 1048576" | bc -l)" \
    "$(echo "($tracked + $carried) / 1048576" | bc -l)" $((limit / 1048576))
if [ $((tracked + carried)) -gt $limit ]; then
    echo "over the limit: pack fewer programs" >&2
    exit 1
fi
echo 'carry: [".deps/prebuilt", ".deps/debs-runtime"]'
