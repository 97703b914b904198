#!/usr/bin/env bash
# Data-race check: builds the CPU-only library and the public-API suite with ThreadSanitizer
# (-DSPECLA_SANITIZE=thread) in their own build folder and runs the concurrency suite under it
# (tests/api/test_concurrency.cpp: sessions of one model on several threads, a shared tokenizer,
# log callbacks, per-thread errors; each session's own worker pool runs meanwhile). Any race
# report fails.
# Engine buffers use the standard allocator in this build (see lib/memory/host_alloc.h): memory
# recycled inside mimalloc, which TSan does not see, would look like races.
#
#   tools/tsan_check.sh [BUILD_DIR]                    default: build-tsan (next to the sources)
#   DOCTEST_ARGS="-tc=*tokenizer*" tools/tsan_check.sh  narrows the concurrency suite further
#
# Suppressions live in tools/tsan.supp (only for third-party code, each entry justified).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-"$ROOT/build-tsan"}
JOBS=$(nproc 2>/dev/null || echo 2)

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
echo "== configure $BUILD"
log="${TMPDIR:-/tmp}/specla-tsan-configure.log"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECLA_SANITIZE=thread -DSPECLA_CUDA=OFF \
    "${launcher[@]}" -DSPECLA_BUILD_BENCH=OFF -DSPECLA_BUILD_SAMPLES=OFF -DSPECLA_BUILD_BINDINGS=OFF \
    -DSPECLA_BUILD_TESTS=ON >"$log" 2>&1 || { cat "$log"; exit 1; }
echo "== build"
cmake --build "$BUILD" -j"$JOBS" --target specla_api_tests

# Report every race (not only the first), then fail through TSan's exit code.
export TSAN_OPTIONS="suppressions=$ROOT/tools/tsan.supp:print_suppressions=0:second_deadlock_stack=1:halt_on_error=0:exitcode=66"

failed=()
run() {
    local name=$1
    shift
    echo "== $name"
    local start=$SECONDS
    if "$@"; then
        echo "-- $name: clean ($((SECONDS - start)) s)"
    else
        echo "-- $name: FAILED (exit $?)"
        failed+=("$name")
    fi
}

# shellcheck disable=SC2086  # DOCTEST_ARGS is a list of options
run "concurrency suite" "$BUILD/tests/specla_api_tests" --no-intro=true -ts=concurrency ${DOCTEST_ARGS:-}

if ((${#failed[@]})); then
    echo "tsan_check: FAILED: ${failed[*]}"
    exit 1
fi
echo "tsan_check: no ThreadSanitizer reports"
