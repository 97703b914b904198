#!/usr/bin/env bash
# Fuzzing check: builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, CPU only) in
# their own build folder and runs each for a bounded time on its seed corpus. Any crash, sanitizer
# report, leak, timeout or out-of-memory fails the run; the input that caused it is saved under
# BUILD/crashers/<target>/ (reproduce with: BUILD/tests/fuzz/fuzz_<target> <file>).
#
#   tools/fuzz_check.sh [BUILD_DIR]                  default: build-fuzz (next to the sources)
#   FUZZ_SECONDS=60      run time of each target (libFuzzer -max_total_time)
#   FUZZ_TARGETS="config tokenizer"                  a subset (default: all four)
#   FUZZ_TIMEOUT=10      seconds one input may take before it counts as a hang
#   FUZZ_ARGS="-runs=0"  more libFuzzer options
#
# New inputs that reach new code go to BUILD/corpus/<target>/, not to the committed seeds
# (tests/fuzz/corpus/<target>/); copy the interesting ones there by hand (libFuzzer -merge=1).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-"$ROOT/build-fuzz"}
JOBS=$(nproc 2>/dev/null || echo 2)
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-"safetensors config tokenizer verify_tree"}
TIMEOUT=${FUZZ_TIMEOUT:-10}
CLANG=${CLANG:-$(command -v clang-14 || command -v clang || true)}
CLANGXX=${CLANGXX:-$(command -v clang++-14 || command -v clang++ || true)}
[[ -n $CLANG && -n $CLANGXX ]] || { echo "fuzz_check: clang not found (Debian: apt-get install clang libclang-rt-14-dev)"; exit 1; }

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
echo "== configure $BUILD ($CLANGXX)"
log="${TMPDIR:-/tmp}/specla-fuzz-configure.log"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$CLANG" \
    -DCMAKE_CXX_COMPILER="$CLANGXX" "${launcher[@]}" -DSPECLA_SANITIZE=ON -DSPECLA_FUZZ=ON -DSPECLA_CUDA=OFF \
    -DSPECLA_BUILD_BENCH=OFF -DSPECLA_BUILD_SAMPLES=OFF -DSPECLA_BUILD_BINDINGS=OFF -DSPECLA_BUILD_TESTS=ON \
    >"$log" 2>&1 || { cat "$log"; exit 1; }
echo "== build"
build_targets=()
for t in $TARGETS; do build_targets+=("fuzz_$t"); done
cmake --build "$BUILD" -j"$JOBS" --target "${build_targets[@]}"

# The sanitizers stop at the first report, so that libFuzzer saves the input.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:allocator_may_return_null=0:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$ROOT/tools/lsan.supp:print_suppressions=0"

failed=()
for t in $TARGETS; do
    echo "== fuzz_$t (${SECONDS_EACH} s)"
    corpus="$BUILD/corpus/$t"
    crashers="$BUILD/crashers/$t"
    mkdir -p "$corpus" "$crashers"
    args=(-max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb=2048 -malloc_limit_mb=1024
          -print_final_stats=1 -artifact_prefix="$crashers/")
    dict="$ROOT/tests/fuzz/dict/$t.dict"
    [[ -f $dict ]] && args+=(-dict="$dict")
    log="$BUILD/fuzz_$t.log"
    # shellcheck disable=SC2086  # FUZZ_ARGS is a list of options
    if "$BUILD/tests/fuzz/fuzz_$t" "${args[@]}" ${FUZZ_ARGS:-} "$corpus" "$ROOT/tests/fuzz/corpus/$t" >"$log" 2>&1; then
        grep -E '^stat::(number_of_executed_units|new_units_added)|^Done ' "$log" | tr '\n' ' '
        echo
        echo "-- fuzz_$t: clean"
    else
        rc=$?
        # The report: libFuzzer's and the sanitizer's lines around the finding, not the progress.
        grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse|INITED|RELOAD)' "$log" | tail -n 80
        echo "-- fuzz_$t: FAILED (exit $rc); input saved in $crashers:"
        ls -1 "$crashers"
        failed+=("$t")
    fi
done

if ((${#failed[@]})); then
    echo "fuzz_check: FAILED: ${failed[*]}"
    exit 1
fi
echo "fuzz_check: no crash, sanitizer report, leak or timeout in ${SECONDS_EACH} s per target"
