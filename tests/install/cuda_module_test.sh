#!/usr/bin/env bash
# A CUDA-enabled build on a host without the CUDA libraries (CUDA builds only). libspecla.so links
# no CUDA library; the CUDA backend is the module libspecla_cuda.so.<ABI>, loaded from
# libspecla's own directory when a model asks for the CUDA backend. Checks:
#   (a) libspecla.so has no NEEDED entry for libcublas, libcudart or libcuda; the module has
#       libcublas and exports only its entry point;
#   (b) the specla program and libspecla copied into an empty directory without the module, run
#       by the dynamic loader with its cache off and only that directory on the library path
#       (so no CUDA library can be found): `specla generate` works on the CPU and
#       `--backend cuda` fails with BACKEND_UNAVAILABLE naming the missing module;
#   (c) the same with the module copied beside them (its run path removed): the CPU still works
#       and `--backend cuda` fails naming the missing cuBLAS library;
#   (d) the build tree as it is (module and CUDA libraries present): `--backend cuda` generates
#       where a GPU exists; without one it fails with BACKEND_UNAVAILABLE and the message of the
#       module's backend constructor, i.e. specla::Error thrown in the module reaches the
#       library's C shim with its status and text.
# Usage: cuda_module_test.sh SPECLA_PROGRAM LIBSPECLA MODULE SOURCE_DIR CMAKE
set -euo pipefail

CLI=${1:?specla program}
LIB=${2:?libspecla.so}
MODULE=${3:?CUDA module}
SRC=${4:?source dir}
CMAKE=${5:-cmake}
MODEL="$SRC/models/gdn-pycode-22m"
PROMPT_IDS="1,2,3,4"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/specla-cudamod-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

step() { echo "== $*"; }
die() {
    echo "FAIL: $*" >&2
    exit 1
}
needed() { objdump -p "$1" | awk '$1 == "NEEDED" { print $2 }'; }

# ---- (a) dependencies -------------------------------------------------------------------------
step "(a) libspecla has no CUDA dependency; the module has"
LIB_NEEDED=$(needed "$LIB")
echo "libspecla NEEDED: $(tr '\n' ' ' <<<"$LIB_NEEDED")"
CUDA_NEEDED=$(grep -E '^lib(cublas|cublasLt|cudart|cuda)\.so' <<<"$LIB_NEEDED" || true)
[[ -z "$CUDA_NEEDED" ]] || die "libspecla.so needs CUDA libraries: $(tr '\n' ' ' <<<"$CUDA_NEEDED")"
[[ -f "$MODULE" ]] || die "the CUDA module $MODULE was not built"
[[ "$(dirname "$(readlink -f "$MODULE")")" == "$(dirname "$(readlink -f "$LIB")")" ]] \
    || die "the CUDA module is not in libspecla's directory"
# (Pipes into `grep -q` are avoided: with pipefail, the writer's SIGPIPE would count as a failure.)
MOD_NEEDED=$(needed "$MODULE")
grep -q '^libcublas\.so' <<<"$MOD_NEEDED" || die "the CUDA module does not link cuBLAS"
MOD_SYMS=$(nm -D --defined-only "$MODULE" | awk 'NF >= 3 { print $3 }')
[[ "$MOD_SYMS" == "specla_cuda_module_v1" ]] \
    || die "the CUDA module exports more than its entry point: $(head -n 10 <<<"$MOD_SYMS" | tr '\n' ' ')"

# ---- a copy of the program and the library, CUDA libraries out of reach --------------------------
SONAME=$(objdump -p "$LIB" | awk '$1 == "SONAME" { print $2 }')
LDSO=$(readelf -l "$CLI" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[[ -x "$LDSO" ]] || die "no program interpreter found for $CLI"
HOST="$WORK/host"
mkdir "$HOST"
cp "$CLI" "$HOST/specla"
cp -L "$LIB" "$HOST/$SONAME"
# The copies' run paths would lead back into the build tree.
printf 'file(RPATH_REMOVE FILE "%s")\n' "$HOST/specla" "$HOST/$SONAME" >"$WORK/strip.cmake"
"$CMAKE" -P "$WORK/strip.cmake" || die "cannot remove the run paths of the copies"
# No ld.so.cache and only $HOST on the library path: the system directories remain (libstdc++,
# PCRE2, ...), the CUDA toolkit's directories do not.
in_host() { "$LDSO" --inhibit-cache --library-path "$HOST" "$@"; }

RESOLVED=$(in_host --list "$HOST/specla") || die "the copied program does not resolve its libraries: $RESOLVED"
grep -q "$SONAME => $HOST/$SONAME" <<<"$RESOLVED" || die "the copied program does not use the copied library: $RESOLVED"

# Runs the copied program; stdout to $WORK/out, stderr to $WORK/err; returns its exit code.
run_host() {
    local rc=0
    in_host "$HOST/specla" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    return $rc
}
generate_cpu() {
    run_host generate --model "$MODEL" --tokens "$PROMPT_IDS" --max-tokens 8 \
        || { cat "$WORK/err" >&2; die "$1: specla generate on the CPU failed"; }
    [[ "$(tail -n 1 "$WORK/out")" =~ ^[0-9]+(,[0-9]+){7}$ ]] \
        || die "$1: specla generate did not print 8 ids: $(cat "$WORK/out")"
    tail -n 1 "$WORK/out"
}
expect_cuda_refused() {
    local what=$1
    shift
    local rc=0
    run_host generate --model "$MODEL" --tokens "$PROMPT_IDS" --max-tokens 8 --backend cuda || rc=$?
    [[ $rc -ne 0 ]] || die "$what: --backend cuda succeeded"
    for p in SPECLA_ERR_BACKEND_UNAVAILABLE "$@"; do
        grep -q -- "$p" "$WORK/err" || { cat "$WORK/err" >&2; die "$what: the message does not mention '$p'"; }
    done
    echo "refused: $(tr '\n' ' ' <"$WORK/err")"
}

# ---- (b) no module -------------------------------------------------------------------------------
step "(b) without the module: CPU generation works, CUDA is refused naming the module"
IDS=$(generate_cpu "no module")
echo "cpu: $IDS"
MODULE_NAME=$(basename "$MODULE")
expect_cuda_refused "no module" "$MODULE_NAME" "$HOST/$MODULE_NAME" "No such file"

# ---- (c) the module without the CUDA libraries ---------------------------------------------------
step "(c) with the module but without the CUDA libraries"
cp "$MODULE" "$HOST/$MODULE_NAME"
printf 'file(RPATH_REMOVE FILE "%s")\n' "$HOST/$MODULE_NAME" >"$WORK/strip.cmake"
"$CMAKE" -P "$WORK/strip.cmake" || die "cannot remove the run path of the module's copy"
MOD_RESOLVED=$(in_host --list "$HOST/$MODULE_NAME" 2>/dev/null || true)
if grep -q 'libcublas.*=> /' <<<"$MOD_RESOLVED"; then
    echo "cuBLAS is in a system directory of this machine: it cannot be hidden; skipped"
else
    [[ "$(generate_cpu "module without CUDA")" == "$IDS" ]] || die "module without CUDA: other ids on the CPU"
    expect_cuda_refused "module without CUDA" "$MODULE_NAME" "libcublas"
fi

# ---- (d) the build tree --------------------------------------------------------------------------
step "(d) the build tree: module and CUDA libraries present"
rc=0
"$CLI" generate --model "$MODEL" --tokens "$PROMPT_IDS" --max-tokens 8 --backend cuda >"$WORK/out" 2>"$WORK/err" || rc=$?
if [[ -e /dev/nvidia0 || -e /dev/nvidiactl ]]; then
    [[ $rc -eq 0 ]] || { cat "$WORK/err" >&2; die "--backend cuda failed on a machine with a GPU"; }
    [[ "$(tail -n 1 "$WORK/out")" =~ ^[0-9]+(,[0-9]+){7}$ ]] || die "--backend cuda did not print 8 ids"
    echo "cuda: $(tail -n 1 "$WORK/out")"
else
    [[ $rc -ne 0 ]] || die "--backend cuda succeeded without a GPU"
    # The backend constructor's own message (lib/backend/cuda/cuda_backend.cpp), not "internal error".
    for p in SPECLA_ERR_BACKEND_UNAVAILABLE "the CUDA backend found no"; do
        grep -q -- "$p" "$WORK/err" || { cat "$WORK/err" >&2; die "no GPU: the message does not mention '$p'"; }
    done
    echo "refused: $(tr '\n' ' ' <"$WORK/err")"
fi

echo "cuda module test: all checks passed"
