#!/usr/bin/env bash
# Memory-safety check: builds the CPU-only library and tests with AddressSanitizer, LeakSanitizer
# and UBSan (-DSPECLA_SANITIZE=ON) in their own build folder, then runs both doctest suites and the
# CLI test under them. Any report fails the run. Engine buffers use the standard allocator in this
# build (see lib/memory/host_alloc.h) so that ASan sees them.
#
#   tools/asan_check.sh [BUILD_DIR]          default: build-asan (next to the sources)
#   DOCTEST_ARGS="-tc=load*" tools/asan_check.sh   passes doctest options to both suites
#
# LeakSanitizer suppressions live in tools/lsan.supp (only for leaks inside third-party runtimes).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-"$ROOT/build-asan"}
JOBS=$(nproc 2>/dev/null || echo 2)

echo "== configure $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECLA_SANITIZE=ON -DSPECLA_CUDA=OFF \
    -DSPECLA_BUILD_BENCH=OFF -DSPECLA_BUILD_TESTS=ON -DSPECLA_BUILD_SAMPLES=ON >"${TMPDIR:-/tmp}/specla-asan-configure.log" 2>&1 \
    || { cat "${TMPDIR:-/tmp}/specla-asan-configure.log"; exit 1; }
echo "== build"
cmake --build "$BUILD" -j"$JOBS" --target specla_api_tests specla_internal_tests specla_cli

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2"
export LSAN_OPTIONS="suppressions=$ROOT/tools/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

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
run "internal suite" "$BUILD/tests/specla_internal_tests" --no-intro=true ${DOCTEST_ARGS:-}
# shellcheck disable=SC2086
run "api suite" "$BUILD/tests/specla_api_tests" --no-intro=true ${DOCTEST_ARGS:-}
run "cli test" bash "$ROOT/tests/install/cli_test.sh" "$BUILD/samples/specla" "$ROOT"

if ((${#failed[@]})); then
    echo "asan_check: FAILED: ${failed[*]}"
    exit 1
fi
echo "asan_check: no AddressSanitizer, LeakSanitizer or UBSan reports"
