#!/usr/bin/env bash
# Run THERE (the GPU machine of the device tool), from the repository root:
#   tools/device/run_on_device.sh [build|prebuilt] [tests] [bench] [memcheck] [racecheck]
#                                 [verify] [api] [eagle] [specbench] [verifycheck] [trace]
#                                 [floor] [experiments] [arch] [baseline]
#   (default: build tests bench memcheck racecheck)
# Unpacks .deps/debs (see fetch_debs.sh) into a prefix under /tmp, configures and builds the CUDA
# build (Release: the test programs and the benchmark drivers), runs the internal tests (the CUDA
# ones included), bench_decode, and the CUDA tests under compute-sanitizer memcheck and racecheck
# with a reduced filter. Speculative verification on the GPU:
#   verify       the internal "cuda verify*" tests (verify.log)
#   api          the public-API CUDA speculative tests, "cuda:*" (api.log)
#   eagle        EAGLE drafter models on the GPU: the internal "cuda eagle*" tests (fixture drafter vs
#                the CPU drafter and the fixture, the target's features vs the CPU's) and the API
#                "cuda: EAGLE*" tests (greedy speculative with the drafter equals plain greedy on
#                gdn_tiny_a and gdn-pycode-22m) (eagle.log)
#   specbench    bench_verify --shape gdn-1.3b and pycode, bench_generate on the eval prompts
#                (prompt lookup, then with the trained EAGLE drafter models/gdn-pycode-22m-eagle,
#                then both with --min-gain 1, the library's default gate, then stopping at EOS),
#                all --backend cuda
#                (specbench.log)
#   trace        bench_decode --trace: the kernel timeline of the per-op decoding step (trace.log),
#                from a second build tree configured with -DSPECLA_KERNEL_TRACE=ON (build-cuda-trace,
#                bench_decode only): the default build's kernels have no trace slots
#   floor        bench_step_floor (an experiment, bench/experiments/step_floor): what the step's
#                structure allows (weight stream, kernel chain without work, persistent skeleton),
#                compared in one run (floor.log)
#   experiments  the persistent decoding step (bench/experiments/persistent_step): its bitwise
#                tests (specla_experiment_tests, experiments.log; the bitwise case also under
#                compute-sanitizer memcheck, experiments_memcheck.log) and bench_persistent_step
#                (per-op vs persistent ms per step, its phase timeline; persistent.log)
#   arch         a second tree built for sm_100a only: its specla program must refuse this GPU
#                precisely at model load (arch.log), and still generate on the CPU
#   baseline     the commit before a change against this build, side by side in one call:
#                bench_decode and bench_verify (GDN-1.3B and pycode shapes) built HERE at that commit
#                and packed by tools/device/pack_baseline.sh (.deps/baseline), run interleaved with
#                this build's (baseline.log; SPECLA_BASELINE_ROUNDS, default 2)
# floor and experiments configure the build with -DSPECLA_BUILD_EXPERIMENTS=ON.
#   profile      where a verification pass's time goes: Nsight Compute's per-kernel durations over
#                bench_verify --only p2 (plain steps and the chain of 16) at the pycode and GDN-1.3B
#                shapes (profile_pycode.log, profile_1p3b.log), and how the speculative passes of
#                bench_generate ran (graph replays, captures, eager passes: passgraphs.log)
#   drafting     fixed-width drafting in one device call (specla_tree_shape FIXED_WIDTH): the beam-step
#                and top-token kernel tests, the one-call-vs-level-by-level test and the last-row
#                top tokens of eval_chain (drafting.log), all under compute-sanitizer memcheck and
#                the two kernels under racecheck (drafting_memcheck.log,
#                drafting_racecheck.log), then bench_generate with the trained drafter, dynamic and
#                fixed-width trees side by side at <= 8/16/32 nodes and fixed width at depths 4 and 6
#                (drafting_bench.log)
#   draftprofile every kernel's GPU time (ncu, launch order) over one generation of the specla program
#                with the trained drafter, fixed-width and dynamic trees, and plain decoding
#                (draftprofile_*.csv), and the same generations' wall times (draftprofile.log)
#   verifycheck  the verify tests (quick mode) under compute-sanitizer memcheck (verifycheck.log)
#                and the node-logits test under racecheck (verifyrace.log)
# Every step has a time limit so that the whole run fits in one device call; logs go to $OUT
# (build.log, tests.log, bench.log, memcheck.log, racecheck.log, ..., summary.txt) and a summary
# is printed last.
set -uo pipefail
root="$(pwd)"
OUT="${OUT:-/tmp/specla-device-out}"
mkdir -p "$OUT"
steps="${*:-build tests bench memcheck racecheck}"
has() { [[ " $steps " == *" $1 "* ]]; }
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t_start=$(date +%s)
elapsed() { echo $(( $(date +%s) - t_start )); }

# ---- dependencies: unpack the carried .deb files ------------------------------------------------
# .deps/debs: everything a build needs (tools/device/fetch_debs.sh); .deps/debs-runtime: the
# run-time libraries alone, what a prebuilt run carries (tools/device/pack_prebuilt.sh).
pfx=/tmp/specla-deps
mkdir -p "$pfx"
n_debs=0
for deb in "$root"/.deps/debs/*.deb "$root"/.deps/debs-runtime/*.deb; do
    [ -e "$deb" ] || continue
    dpkg -x "$deb" "$pfx"
    n_debs=$((n_debs + 1))
done
[ $n_debs -gt 0 ] || note "no .deb files in .deps/debs or .deps/debs-runtime (run tools/device/fetch_debs.sh first)"
libdir="$pfx/usr/lib/x86_64-linux-gnu"
# The .pc files say prefix=/usr: point them at the unpacked tree.
for pc in "$libdir"/pkgconfig/*.pc; do [ -e "$pc" ] && sed -i "s|^prefix=/usr\$|prefix=$pfx/usr|" "$pc"; done
export CMAKE_PREFIX_PATH="$pfx/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && cuda_lib="$cuda_lib:$d"; done
# cuBLAS from the toolkit; the Python packages' copy as a last resort.
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu*/lib; do [ -d "$d" ] && cuda_lib="$cuda_lib:$d"; done
export LD_LIBRARY_PATH="$libdir$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPECLA_TEST_DATA_DIR="$root/tests/fixtures"
export PATH="/usr/local/cuda/bin:$PATH"

note "== device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
note "== nvcc: $(nvcc --version 2>/dev/null | tail -1); cmake: $(cmake --version | head -1); g++: $(g++ --version | head -1)"

build="$root/build-cuda"
tests_bin="$build/tests/specla_internal_tests"
api_bin="$build/tests/specla_api_tests"
bench_bin="$build/bench/bench_decode"
floor_bin="$build/bench/experiments/bench_step_floor"
exp_tests_bin="$build/bench/experiments/specla_experiment_tests"
persistent_bin="$build/bench/experiments/bench_persistent_step"
trace_build="$root/build-cuda-trace"
trace_bin="$trace_build/bench/bench_decode"
exp_flag="-DSPECLA_BUILD_EXPERIMENTS=OFF"
exp_targets=""
if has floor || has experiments; then
    exp_flag="-DSPECLA_BUILD_EXPERIMENTS=ON"
    exp_targets="bench_step_floor bench_persistent_step specla_experiment_tests"
fi

# draftprofile runs the specla program (a generation with no benchmark around it).
samples_flag="-DSPECLA_BUILD_SAMPLES=OFF"
sample_targets=""
if has draftprofile; then
    samples_flag="-DSPECLA_BUILD_SAMPLES=ON"
    sample_targets="specla_cli"
fi

gen=""
command -v ninja >/dev/null && gen="-G Ninja"
if has build; then
    {
        cmake -S "$root" -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DSPECLA_CUDA=ON \
            $samples_flag -DSPECLA_BUILD_TESTS=ON -DSPECLA_BUILD_BENCH=ON \
            -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $exp_flag &&
        timeout "${SPECLA_BUILD_LIMIT:-420}" cmake --build "$build" -j "$(nproc)" --target specla_internal_tests \
            bench_decode specla_api_tests bench_verify bench_generate $exp_targets $sample_targets
    } >"$OUT/build.log" 2>&1
    rc=$?
    note "== build: rc=$rc after $(elapsed) s"
    if [ $rc -ne 0 ]; then
        grep -E "error|Error|FAILED" "$OUT/build.log" | head -40 | tee -a "$summary"
        steps="$steps prebuilt"
    fi
    if has trace; then
        {
            cmake -S "$root" -B "$trace_build" $gen -DCMAKE_BUILD_TYPE=Release -DSPECLA_CUDA=ON \
                -DSPECLA_BUILD_SAMPLES=OFF -DSPECLA_BUILD_TESTS=OFF -DSPECLA_BUILD_BENCH=ON \
                -DSPECLA_BUILD_BINDINGS=OFF -DSPECLA_KERNEL_TRACE=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 &&
            timeout "${SPECLA_BUILD_LIMIT:-420}" cmake --build "$trace_build" -j "$(nproc)" --target bench_decode
        } >"$OUT/build_trace.log" 2>&1
        note "== build with trace slots (bench_decode): rc=$? after $(elapsed) s"
    fi
fi
# Programs built elsewhere (same toolkit), carried in .deps/prebuilt (tools/device/pack_prebuilt.sh):
# used when asked for with the step `prebuilt`, or when the build above failed.
if has prebuilt; then
    pre="$root/.deps/prebuilt"
    # Each program as NAME.xz, NAME.gz or NAME; unpacked into /tmp/specla-prebuilt.
    unpack() {
        local dst="/tmp/specla-prebuilt/$1"
        if [ -e "$pre/$1.xz" ]; then xz -dc "$pre/$1.xz" >"$dst"
        elif [ -e "$pre/$1.gz" ]; then gunzip -c "$pre/$1.gz" >"$dst"
        elif [ -e "$pre/$1" ]; then cp "$pre/$1" "$dst"
        else return 1; fi
        chmod +x "$dst"
    }
    mkdir -p /tmp/specla-prebuilt
    # Each program that was carried replaces the build's; any subset may be carried.
    found=0
    if unpack specla_internal_tests; then tests_bin=/tmp/specla-prebuilt/specla_internal_tests; found=1; fi
    if unpack bench_decode; then bench_bin=/tmp/specla-prebuilt/bench_decode; found=1; fi
    if unpack bench_step_floor; then floor_bin=/tmp/specla-prebuilt/bench_step_floor; found=1; fi
    if unpack bench_persistent_step; then persistent_bin=/tmp/specla-prebuilt/bench_persistent_step; found=1; fi
    if unpack specla_experiment_tests; then exp_tests_bin=/tmp/specla-prebuilt/specla_experiment_tests; found=1; fi
    # The public-API tests with the shared library they link.
    if unpack specla_api_tests && unpack libspecla.so.3; then
        api_bin=/tmp/specla-prebuilt/specla_api_tests
        export LD_LIBRARY_PATH="/tmp/specla-prebuilt:$LD_LIBRARY_PATH"
        found=1
    fi
    if [ $found -eq 0 ]; then note "no prebuilt programs carried"; exit 1; fi
    note "== using the carried prebuilt programs"
fi

if has verify; then
    timeout "${SPECLA_VERIFY_LIMIT:-180}" "$tests_bin" --no-intro=true -tc="cuda verify*" >"$OUT/verify.log" 2>&1
    note "== internal CUDA verification tests: rc=$? after $(elapsed) s"
    grep -E "seed|bitwise|rel err|skipped|differs|ERROR|FAILED|test cases|assertions" "$OUT/verify.log" | head -80 >>"$summary"
fi
if has api; then
    timeout "${SPECLA_API_LIMIT:-180}" "$api_bin" --no-intro=true -tc="${SPECLA_API_FILTER:-cuda:*,*CUDA module*}" >"$OUT/api.log" 2>&1
    note "== API CUDA speculative tests: rc=$? after $(elapsed) s"
    grep -E "speculative cuda|skipped|differs|ERROR|FAILED|test cases|assertions" "$OUT/api.log" | head -30 >>"$summary"
fi
if has eagle; then
    {
        timeout "${SPECLA_EAGLE_LIMIT:-180}" "$tests_bin" --no-intro=true -tc="${SPECLA_EAGLE_FILTER:-cuda eagle*}"
        echo "internal rc=$?"
        timeout "${SPECLA_EAGLE_LIMIT:-180}" "$api_bin" --no-intro=true -tc="${SPECLA_EAGLE_API_FILTER:-cuda: EAGLE*}"
        echo "api rc=$?"
    } >"$OUT/eagle.log" 2>&1
    note "== EAGLE drafter on CUDA ($(grep -E '^(internal|api) rc=' "$OUT/eagle.log" | tr '\n' ' ')): after $(elapsed) s"
    grep -E "drafter|features vs|eagle cuda|skipped|ERROR|FAILED|test cases|assertions|rc=" "$OUT/eagle.log" | head -60 >>"$summary"
fi
# A GPU the kernels are not built for is refused at model load with a message naming both: a
# second tree whose kernels are built for sm_100a only, its specla program asked for CUDA here.
if has arch; then
    arch_build="$root/build-cuda-sm100a"
    {
        cmake -S "$root" -B "$arch_build" $gen -DCMAKE_BUILD_TYPE=Release -DSPECLA_CUDA=ON \
            -DSPECLA_BUILD_SAMPLES=ON -DSPECLA_BUILD_TESTS=OFF -DSPECLA_BUILD_BENCH=OFF -DSPECLA_BUILD_BINDINGS=OFF \
            -DSPECLA_CUDA_GENCODE="-gencode=arch=compute_100a,code=sm_100a" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 &&
        timeout "${SPECLA_BUILD_LIMIT:-420}" cmake --build "$arch_build" -j "$(nproc)" --target specla_cli
    } >"$OUT/arch_build.log" 2>&1
    note "== build for sm_100a only: rc=$? after $(elapsed) s"
    {
        "$arch_build/samples/specla" generate --model "$root/models/gdn-pycode-22m" --tokens 1,2,3 --max-tokens 8 --backend cpu
        echo "cpu rc=$?"
        "$arch_build/samples/specla" generate --model "$root/models/gdn-pycode-22m" --tokens 1,2,3 --max-tokens 8 --backend cuda
        echo "cuda rc=$?"
    } >"$OUT/arch.log" 2>&1
    note "== the sm_100a build on this GPU:"
    cat "$OUT/arch.log" >>"$summary"
fi
if has specbench; then
    {
        timeout "${SPECLA_SPECBENCH_LIMIT:-200}" "$build/bench/bench_verify" --shape gdn-1.3b --backend cuda --reps 15
        echo "rc=$?"
        timeout 40 "$build/bench/bench_verify" --shape pycode --backend cuda --reps 15
        echo "rc=$?"
        timeout 120 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" --draft-nodes 2,4,8,16
        echo "rc=$?"
        # The same with the trained EAGLE drafter (bench_generate --drafter DIR).
        timeout 150 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" \
            --drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 8 --eagle-nodes 8,16,32
        echo "rc=$?"
        # What an application gets with the library's default speculation_min_gain = 1: plain
        # steps where speculation measures slower (the runs above measure speculation as such).
        echo "with --min-gain 1:"
        timeout 150 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" \
            --drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 4 --eagle-nodes 16 --min-gain 1
        echo "rc=$?"
        # The figures' other definition: a generation ends at EOS (gdn-pycode-22m ends 53 of its 80
        # eval prompts at once, so these come from the other 27).
        echo "with --stop-at-eos:"
        timeout 150 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" \
            --drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 8 --eagle-nodes 16 --stop-at-eos
        echo "rc=$?"
    } >"$OUT/specbench.log" 2>&1
    note "== speculative benchmarks: after $(elapsed) s"
    grep -E "^\||^shape|^model|^with|rc=" "$OUT/specbench.log" >>"$summary"
fi
if has profile; then
    for shape in pycode gdn-1.3b; do
        log="$OUT/profile_${shape/gdn-1.3b/1p3b}.log"
        "$build/bench/bench_verify" --shape "$shape" --backend cuda --reps 10 --only p2 >"$log" 2>&1
        if command -v ncu >/dev/null; then
            timeout "${SPECLA_PROFILE_LIMIT:-150}" ncu --clock-control none --metrics gpu__time_duration.sum \
                --print-summary per-kernel "$build/bench/bench_verify" --shape "$shape" --backend cuda --reps 10 \
                --only p2 >>"$log" 2>&1
            note "== ncu over bench_verify --only p2 ($shape): rc=$? after $(elapsed) s"
        else
            note "ncu not found"
        fi
    done
    timeout 200 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" \
        --drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 8 --eagle-nodes 16 --prompts 20 --debug-log \
        >"$OUT/passgraphs.log" 2>&1
    note "== bench_generate --debug-log (20 prompts): rc=$? after $(elapsed) s"
    grep -E "^\||CUDA sequence state" "$OUT/passgraphs.log" >>"$summary"
fi
if has verifycheck && command -v compute-sanitizer >/dev/null; then
    SPECLA_CUDA_VERIFY_QUICK=1 timeout "${SPECLA_VERIFYCHECK_LIMIT:-240}" compute-sanitizer --tool memcheck \
        --error-exitcode 99 --print-limit 20 "$tests_bin" --no-intro=true -tc="cuda verify*" >"$OUT/verifycheck.log" 2>&1
    note "== compute-sanitizer memcheck (cuda verify*, quick): rc=$? after $(elapsed) s"
    grep -E "ERROR SUMMARY|Invalid|test cases|assertions|timed out" "$OUT/verifycheck.log" | head -12 >>"$summary"
    SPECLA_CUDA_VERIFY_QUICK=1 timeout "${SPECLA_VERIFYCHECK_LIMIT:-240}" compute-sanitizer --tool racecheck \
        --error-exitcode 99 --print-limit 20 "$tests_bin" --no-intro=true -tc="cuda verify: node*" \
        >"$OUT/verifyrace.log" 2>&1
    note "== compute-sanitizer racecheck (cuda verify: node*, quick): rc=$? after $(elapsed) s"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard|test cases|assertions|timed out" "$OUT/verifyrace.log" | head -12 >>"$summary"
fi

if has tests; then
    timeout "${SPECLA_TEST_LIMIT:-240}" "$tests_bin" --no-intro=true -tc="${SPECLA_TEST_FILTER:-*}" >"$OUT/tests.log" 2>&1
    rc=$?
    note "== internal tests (CPU + CUDA): rc=$rc after $(elapsed) s"
    grep -E "rel err|MESSAGE|skipped|seed|mode|ERROR|FAILED|CHECK|test cases|assertions" "$OUT/tests.log" | grep -v "^\s*$" | head -120 >>"$summary"
fi

if has trace; then
    timeout 120 "$trace_bin" --trace >"$OUT/trace.log" 2>&1
    note "== bench_decode --trace (build with trace slots): rc=$? after $(elapsed) s"
    sed -n '/kernel-per-op step timeline/,$p' "$OUT/trace.log" >>"$summary"
fi
if has floor; then
    timeout "${SPECLA_FLOOR_LIMIT:-120}" "$floor_bin" >"$OUT/floor.log" 2>&1
    note "== bench_step_floor: rc=$? after $(elapsed) s"
    grep -vE '^check' "$OUT/floor.log" | tail -45 >>"$summary"
fi
if has experiments; then
    timeout "${SPECLA_EXPERIMENTS_LIMIT:-240}" "$exp_tests_bin" --no-intro=true >"$OUT/experiments.log" 2>&1
    note "== experiment tests (persistent step): rc=$? after $(elapsed) s"
    grep -E "seed|persistent|rel err|skipped|ERROR|FAILED|test cases|assertions" "$OUT/experiments.log" | head -60 >>"$summary"
    if command -v compute-sanitizer >/dev/null; then
        # Not racecheck: it misreads the persistent step's ring (see below).
        timeout "${SPECLA_MEMCHECK_LIMIT:-240}" compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
            "$exp_tests_bin" --no-intro=true -tc="persistent step: bitwise*" >"$OUT/experiments_memcheck.log" 2>&1
        note "== compute-sanitizer memcheck (persistent step: bitwise*): rc=$? after $(elapsed) s"
        grep -E "ERROR SUMMARY|Invalid|test cases|timed out" "$OUT/experiments_memcheck.log" | head -12 >>"$summary"
    fi
    timeout 180 "$persistent_bin" >"$OUT/persistent.log" 2>&1
    note "== bench_persistent_step: rc=$? after $(elapsed) s"
    cat "$OUT/persistent.log" >>"$summary"
fi
if has bench; then
    # SPECLA_BENCH_ARGS: extra arguments (e.g. --trace --repeats 9).
    timeout "${SPECLA_BENCH_LIMIT:-300}" "$bench_bin" --model "$root/models/gdn-pycode-22m" ${SPECLA_BENCH_ARGS:-} \
        >"$OUT/bench.log" 2>&1
    note "== bench_decode: rc=$? after $(elapsed) s"
fi

if has baseline; then
    base=/tmp/specla-baseline
    mkdir -p "$base"
    ok=1
    for p in bench_decode bench_verify; do
        if [ -e "$root/.deps/baseline/$p.xz" ]; then
            xz -dc "$root/.deps/baseline/$p.xz" >"$base/$p" && chmod +x "$base/$p"
        else
            ok=0
        fi
    done
    if [ $ok -eq 1 ]; then
        {
            cat "$root/.deps/baseline/COMMIT" 2>/dev/null
            for round in $(seq 1 "${SPECLA_BASELINE_ROUNDS:-2}"); do
                for side in baseline new; do
                    dir="$base"
                    [ "$side" = new ] && dir="$build/bench"
                    echo "==== round $round: $side bench_decode"
                    timeout 150 "$dir/bench_decode" --model "$root/models/gdn-pycode-22m"
                    echo "rc=$?"
                    echo "==== round $round: $side bench_verify gdn-1.3b"
                    timeout 150 "$dir/bench_verify" --shape gdn-1.3b --backend cuda --reps 7
                    echo "rc=$?"
                    echo "==== round $round: $side bench_verify pycode"
                    timeout 60 "$dir/bench_verify" --shape pycode --backend cuda --reps 7
                    echo "rc=$?"
                done
            done
        } >"$OUT/baseline.log" 2>&1
        note "== baseline vs new: rc=$? after $(elapsed) s"
    else
        note "== baseline: no .deps/baseline/bench_decode.xz and bench_verify.xz (tools/device/pack_baseline.sh)"
    fi
fi

sanitize() {  # tool, filter, limit, log name
    local tool=$1 filter=$2 limit=$3 log="$OUT/$4.log"
    if ! command -v compute-sanitizer >/dev/null; then note "compute-sanitizer not found"; return; fi
    timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
        "$tests_bin" --no-intro=true -tc="$filter" >"$log" 2>&1
    local rc=$?
    note "== compute-sanitizer $tool (-tc=\"$filter\"): rc=$rc after $(elapsed) s"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard|test cases|timed out" "$log" | head -12 >>"$summary"
}
# Reduced filters so that both tools fit in one call: every kernel test, the decoding path (graph
# replay included) and the block path with its cuBLAS calls under memcheck; the kernels that use
# shared memory (and the per-op decoding step) under racecheck, the GEMV separately (largest).
# The sampling test is left out of racecheck: its CUB sorts make it far too slow there.
if has drafting; then
    drafting_filter="cuda kernels: the fixed-width drafting*,cuda kernels: top tokens*,cuda eagle: fixed-width*,cuda eagle: eval_chain*"
    {
        timeout 120 "$tests_bin" --no-intro=true -tc="$drafting_filter"
        echo "internal rc=$?"
        timeout 120 "$api_bin" --no-intro=true -tc="cuda: EAGLE greedy*"
        echo "api rc=$?"
    } >"$OUT/drafting.log" 2>&1
    note "== fixed-width drafting ($(grep -E '^(internal|api) rc=' "$OUT/drafting.log" | tr '\n' ' ')): after $(elapsed) s"
    grep -E "fixed-width|frontier entries|eagle cuda|ERROR|FAILED|test cases|assertions|rc=" "$OUT/drafting.log" | head -30 >>"$summary"
    sanitize memcheck "$drafting_filter" 180 drafting_memcheck
    sanitize racecheck "cuda kernels: the fixed-width drafting*,cuda kernels: top tokens*" 120 drafting_racecheck
    {
        timeout 200 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" \
            --drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 8 --eagle-nodes 8,16,32 \
            --eagle-shapes dynamic,fixed_width --debug-log
        echo "rc=$?"
        for depth in 4 6; do
            timeout 100 "$build/bench/bench_generate" --backend cuda --model "$root/models/gdn-pycode-22m" \
                --drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 8 --eagle-nodes 16 \
                --eagle-shapes fixed_width --eagle-depth $depth
            echo "rc=$?"
        done
    } >"$OUT/drafting_bench.log" 2>&1
    note "== fixed-width drafting bench: after $(elapsed) s"
    grep -E "^\| (plain|speculative)|rc=" "$OUT/drafting_bench.log" | head -30 >>"$summary"
fi
# Where an EAGLE pass's GPU time goes: every kernel's duration (Nsight Compute, in launch order)
# over one generation of the specla program with the trained drafter, fixed-width and dynamic
# trees, and plain decoding for the step's own kernels (draftprofile_*.csv; the kernels between
# two beam steps are one drafting level). The same generations without the profiler give the wall
# time and its split by phase, from the library's debug messages (draftprofile.log).
if has draftprofile; then
    cli="$build/samples/specla"
    prompt=$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
    gen_args=(generate --backend cuda -m "$root/models/gdn-pycode-22m" -n 96 --ignore-eos --prompt "$prompt")
    eagle_args=(--drafter "$root/models/gdn-pycode-22m-eagle" --draft-nodes 16 --draft-depth 8 --min-gain 0 -v)
    {
        for shape in fixed_width dynamic; do
            echo "== $shape"
            "$cli" --log-level debug "${gen_args[@]}" "${eagle_args[@]}" --tree-shape $shape
        done
        echo "== plain"
        "$cli" --log-level debug "${gen_args[@]}" -v
    } >"$OUT/draftprofile.log" 2>&1
    if command -v ncu >/dev/null; then
        for shape in fixed_width dynamic plain; do
            args=("${gen_args[@]}")
            [ $shape = plain ] || args+=("${eagle_args[@]}" --tree-shape $shape)
            timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
                --log-file "$OUT/draftprofile_$shape.csv" "$cli" "${args[@]}" >/dev/null 2>&1
            note "== ncu over specla generate ($shape): rc=$? after $(elapsed) s"
        done
    else
        note "ncu not found"
    fi
    grep -E "^==|speculative|EAGLE drafter|tokens/s|sequence state" "$OUT/draftprofile.log" >>"$summary"
fi
has memcheck && sanitize memcheck "cuda kernels*,cuda backend: decoding*,cuda backend: device sampling*,cuda backend: blocks*" \
    "${SPECLA_MEMCHECK_LIMIT:-240}" memcheck
# The persistent step (an experiment; its memcheck run is in the `experiments` step) is never run
# under racecheck: racecheck reports its ring stages' shared-memory reads against the next bulk
# copy into the stage, an order it does not follow through the stage's "empty" mbarrier (every
# consumer warp arrives after its reads; the producer waits for that phase before it issues the
# copy).
has racecheck && sanitize racecheck "cuda kernels: chunk*,cuda kernels: block conv*,cuda kernels: recurrent*,cuda kernels: in_proj*,cuda kernels: top tokens*,cuda backend: decoding*" \
    "${SPECLA_RACECHECK_LIMIT:-120}" racecheck
has racecheck && sanitize racecheck "cuda kernels: bf16 GEMV*" "${SPECLA_RACECHECK_LIMIT:-120}" racecheck_gemv

echo
echo "================ summary ================"
cat "$summary"
echo "================ tests (tail) ================"
if [ -f "$OUT/tests.log" ]; then tail -5 "$OUT/tests.log"; fi
echo "================ bench table ================"
if [ -f "$OUT/bench.log" ]; then sed -n '/^measure /,$p' "$OUT/bench.log"; fi
exit 0
