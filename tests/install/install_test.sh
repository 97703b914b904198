#!/usr/bin/env bash
# Installs the current build into a temporary prefix and uses it as a downstream project would:
#   (a) pkg-config flags build and run samples/c/hello.c (C99, -Wall -Werror), also through its
#       Makefile;
#   (b) a CMake project finds it with find_package(SpecLA) and builds and runs;
#   (c) the shared library exports only specla_* symbols;
#   (d) its SONAME is libspecla.so.<SPECLA_ABI_VERSION> (3);
#   (e) the installed header compiles as C99 -pedantic and as C++;
#   (f) the Java and C# bindings, where they were built, compile their samples against the
#       installed jar / assembly and run them on the shipped model.
#   (g) the installed specla program runs from the prefix with a clean environment (no
#       LD_LIBRARY_PATH: its run path finds the library) and generates; LICENSE and NOTICE are
#       installed.
#   (h) x86-64: the library runs on any x86-64 CPU: no AVX instruction outside the kernels'
#       x86-64-v3 clones (which run only where the CPU has them), and the installed program
#       generates the same tokens under qemu emulating a CPU without AVX (where qemu is found).
#   (i) libspecla.so needs no CUDA library; in a CUDA build the CUDA module is installed beside
#       it (where the library looks for it).
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [CC] [CXX] [CMAKE] [CONFIG] [CUDA_MODULE_NAME or -]
set -euo pipefail

BUILD=${1:?build dir}
SRC=${2:?source dir}
CC=${3:-cc}
CXX=${4:-c++}
CMAKE=${5:-cmake}
CONFIG=${6:-}
CUDA_MODULE=${7:--}
MODEL="$SRC/tests/fixtures/gdn_tiny_a"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/specla-install-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PREFIX="$WORK/prefix"

step() { echo "== $*"; }
die() {
    echo "FAIL: $*" >&2
    exit 1
}

step "cmake --install into a temporary prefix"
install_args=(--install "$BUILD" --prefix "$PREFIX")
[[ -n "$CONFIG" ]] && install_args+=(--config "$CONFIG")
"$CMAKE" "${install_args[@]}" >"$WORK/install.log" || { cat "$WORK/install.log"; die "cmake --install failed"; }

LIB=$(find "$PREFIX" -name 'libspecla.so' | head -n 1)
[[ -n "$LIB" ]] || die "no libspecla.so under the prefix"
LIBDIR=$(dirname "$LIB")
PCDIR=$(dirname "$(find "$PREFIX" -name specla.pc | head -n 1)")
[[ -f "$PCDIR/specla.pc" ]] || die "no specla.pc under the prefix"
[[ -f "$PREFIX/include/specla/specla.h" ]] || die "no include/specla/specla.h under the prefix"
[[ -f "$LIBDIR/cmake/SpecLA/SpecLAConfig.cmake" ]] || die "no SpecLAConfig.cmake under the prefix"
echo "library: $LIB"

# ---- (a) pkg-config ---------------------------------------------------------------------------
step "(a) pkg-config flags build and run samples/c/hello.c"
FLAGS=$(PKG_CONFIG_PATH="$PCDIR" pkg-config --cflags --libs specla) || die "pkg-config --cflags --libs specla failed"
echo "pkg-config: $FLAGS"
# The flags must point into this prefix, not at the prefix the build was configured for.
INC=$(PKG_CONFIG_PATH="$PCDIR" pkg-config --variable=includedir specla)
[[ -f "$INC/specla/specla.h" ]] || die "pkg-config includedir '$INC' does not hold specla/specla.h"
PCLIB=$(PKG_CONFIG_PATH="$PCDIR" pkg-config --variable=libdir specla)
[[ -f "$PCLIB/libspecla.so" ]] || die "pkg-config libdir '$PCLIB' does not hold libspecla.so"
[[ "$(PKG_CONFIG_PATH="$PCDIR" pkg-config --modversion specla)" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] \
    || die "pkg-config --modversion is not a version"

# shellcheck disable=SC2086  # FLAGS is a list of words
"$CC" -std=c99 -Wall -Werror "$SRC/samples/c/hello.c" $FLAGS -o "$WORK/hello" \
    || die "samples/c/hello.c does not compile with the pkg-config flags"
OUT=$(LD_LIBRARY_PATH="$LIBDIR" "$WORK/hello" "$MODEL") || die "hello failed: $OUT"
echo "$OUT"
grep -q '^SpecLA [0-9]' <<<"$OUT" || die "hello did not print the version"
HELLO_IDS=$(tail -n 1 <<<"$OUT")
[[ "$HELLO_IDS" =~ ^[0-9]+(,[0-9]+){15}$ ]] || die "hello did not print 16 token ids: '$HELLO_IDS'"
# Into a variable first: `grep -q` may exit before ldd has written everything, and pipefail
# would then report ldd's SIGPIPE as a failure.
HELLO_LIBS=$(LD_LIBRARY_PATH="$LIBDIR" ldd "$WORK/hello")
grep -q "$LIBDIR/libspecla.so.3" <<<"$HELLO_LIBS" \
    || die "hello did not resolve libspecla from the prefix"

# The sample's own Makefile, in a scratch copy (it builds next to its source).
mkdir "$WORK/make"
cp "$SRC/samples/c/hello.c" "$SRC/samples/c/Makefile" "$WORK/make/"
PKG_CONFIG_PATH="$PCDIR" make -s -C "$WORK/make" CC="$CC" CFLAGS="-O2 -std=c99 -Wall -Werror" >/dev/null \
    || die "samples/c/Makefile failed"
[[ "$(LD_LIBRARY_PATH="$LIBDIR" "$WORK/make/hello" "$MODEL" | tail -n 1)" == "$HELLO_IDS" ]] \
    || die "the Makefile build of hello prints other ids"

# ---- (b) CMake package --------------------------------------------------------------------------
step "(b) a CMake project uses find_package(SpecLA)"
"$CMAKE" -S "$SRC/tests/install/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release >"$WORK/consumer.log" 2>&1 \
    || { cat "$WORK/consumer.log"; die "the consumer project does not configure"; }
grep -q "SpecLA_DIR: $PREFIX/" "$WORK/consumer.log" \
    || { grep SpecLA_DIR "$WORK/consumer.log" || true; die "find_package did not find the package in the prefix"; }
"$CMAKE" --build "$WORK/consumer" >>"$WORK/consumer.log" 2>&1 \
    || { cat "$WORK/consumer.log"; die "the consumer project does not build"; }
# Built-tree executables carry the imported library's directory as RPATH: no LD_LIBRARY_PATH.
OUT=$("$WORK/consumer/consumer" "$MODEL") || die "consumer failed: $OUT"
echo "$OUT"
[[ "$OUT" =~ ^vocab\ 512\ next\ [0-9]+$ ]] || die "unexpected consumer output '$OUT'"

# ---- (c) exported symbols -----------------------------------------------------------------------
step "(c) only specla_* symbols are exported"
SYMS=$(nm -D --defined-only "$LIB" | awk 'NF >= 3 { print $3 }')
[[ -n "$SYMS" ]] || die "nm found no exported symbols"
OTHERS=$(grep -v '^specla_' <<<"$SYMS" || true)
[[ -z "$OTHERS" ]] || die "symbols without the specla_ prefix are exported: $(head -n 20 <<<"$OTHERS" | tr '\n' ' ')"
for fn in specla_version specla_last_error specla_model_load specla_session_eval specla_generate; do
    grep -qx "$fn" <<<"$SYMS" || die "$fn is not exported"
done
echo "$(wc -l <<<"$SYMS") symbols, all specla_*"

# ---- (c2) the process's allocator is left alone ---------------------------------------------------
step "(c2) neither libspecla nor a library it needs replaces malloc or operator new"
ALLOC_SYMS='^(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|_Znwm|_Znam|_ZdlPv|_ZdaPv)$'
nm -D --defined-only "$LIB" | awk 'NF >= 3 { print $3 }' | grep -Eq "$ALLOC_SYMS" \
    && die "libspecla exports an allocator symbol"
# Every NEEDED library except the C library and the C++ runtime, whose allocator it is.
while read -r dep path; do
    case "$dep" in libc.so.*|libstdc++.so.*|ld-linux*|libasan.so.*|libubsan.so.*) continue ;; esac
    [[ -f "$path" ]] || continue
    if nm -D --defined-only "$path" | awk 'NF >= 3 { print $3 }' | grep -Eq "$ALLOC_SYMS"; then
        die "NEEDED library $dep ($path) defines malloc/operator new and would interpose them"
    fi
done < <(ldd "$LIB" | awk '$2 == "=>" { print $1, $3 }')
echo "no allocator symbols in libspecla or its NEEDED libraries"

# ---- (d) SONAME -----------------------------------------------------------------------------------
step "(d) SONAME"
SONAME=$(objdump -p "$LIB" | awk '$1 == "SONAME" { print $2 }')
ABI=$(awk '$1 == "#define" && $2 == "SPECLA_ABI_VERSION" { print $3 }' "$PREFIX/include/specla/specla.h")
[[ "$SONAME" == "libspecla.so.3" ]] || die "SONAME is '$SONAME', expected libspecla.so.3"
[[ "$SONAME" == "libspecla.so.$ABI" ]] || die "SONAME '$SONAME' does not match SPECLA_ABI_VERSION $ABI"
[[ -L "$LIBDIR/libspecla.so" && -e "$LIBDIR/$SONAME" ]] || die "libspecla.so -> $SONAME links are missing"
echo "$SONAME"

# ---- (e) the header as C and C++ ------------------------------------------------------------------
step "(e) the installed header compiles as C99 -pedantic and as C++"
printf '#include <specla/specla.h>\nint main(void) { specla_model_params p = specla_model_default_params(); return (int)p.backend; }\n' \
    >"$WORK/header.c"
cp "$WORK/header.c" "$WORK/header.cpp"
for std in c99 c11; do
    "$CC" -std=$std -pedantic -Wall -Wextra -Wstrict-prototypes -Werror -fsyntax-only -I"$PREFIX/include" \
        "$WORK/header.c" || die "the header does not compile as $std -pedantic"
done
for std in c++11 c++17; do
    "$CXX" -std=$std -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$PREFIX/include" "$WORK/header.cpp" \
        || die "the header does not compile as $std"
done

# ---- (f) the language bindings --------------------------------------------------------------------
step "(f) the Java and C# bindings from the prefix"
BIG_MODEL="$SRC/models/gdn-pycode-22m"
JAR="$PREFIX/share/java/specla.jar"
if [[ -f "$JAR" ]] && command -v javac >/dev/null && command -v java >/dev/null; then
    mkdir "$WORK/java"
    javac -encoding UTF-8 -d "$WORK/java" -cp "$JAR" "$SRC/bindings/java/sample/org/specla/sample/GenerateSample.java" \
        || die "the Java sample does not compile against the installed jar"
    # Only java.library.path: the JNI library finds libspecla through its run path.
    OUT=$(java -Djava.library.path="$LIBDIR" -cp "$JAR:$WORK/java" org.specla.sample.GenerateSample "$BIG_MODEL") \
        || die "the Java sample failed from the prefix: $OUT"
    grep -q "tokens per pass" <<<"$OUT" || die "unexpected Java sample output: $OUT"
    echo "Java: sample ran from $JAR"
else
    echo "Java: not installed by this build or no JDK here; skipped"
fi
DLL="$PREFIX/lib/cli/specla/Specla.dll"
MCS=$(command -v mcs || command -v csc || true)
if [[ -f "$DLL" && -n "$MCS" ]] && command -v mono >/dev/null; then
    "$MCS" -nologo -target:exe -out:"$WORK/sample.exe" -r:"$DLL" "$SRC/bindings/csharp/sample/GenerateSample.cs" \
        || die "the C# sample does not compile against the installed assembly"
    OUT=$(MONO_PATH="$(dirname "$DLL")" LD_LIBRARY_PATH="$LIBDIR" mono "$WORK/sample.exe" "$BIG_MODEL") \
        || die "the C# sample failed from the prefix: $OUT"
    grep -q "tokens per pass" <<<"$OUT" || die "unexpected C# sample output: $OUT"
    echo "C#: sample ran from $DLL"
else
    echo "C#: not installed by this build or no C# compiler and mono here; skipped"
fi

# ---- (g) the installed program and the licence ----------------------------------------------------
step "(g) the installed specla program runs from the prefix; LICENSE is installed"
for f in LICENSE NOTICE; do
    cmp -s "$SRC/$f" "$PREFIX/share/doc/specla/$f" || die "share/doc/specla/$f is missing or differs from $f"
done
if [[ -x "$BUILD/samples/specla" ]]; then
    CLI="$PREFIX/bin/specla"
    [[ -x "$CLI" ]] || die "the build has the specla program but the prefix has no bin/specla"
    # A clean environment: nothing tells the loader where the prefix is.
    OUT=$(env -i PATH=/usr/bin:/bin "$CLI" generate --model "$MODEL" --tokens 1,2,3 --max-tokens 5 --quiet 2>&1) \
        || die "the installed specla program does not run from its prefix: $OUT"
    [[ "$OUT" =~ ^[0-9]+(,[0-9]+){4}$ ]] || die "the installed specla program did not print 5 token ids: '$OUT'"
    RESOLVED=$(env -i PATH=/usr/bin:/bin ldd "$CLI" | awk '$1 == "libspecla.so.3" { print $3 }')
    [[ -n "$RESOLVED" && "$(readlink -f "$RESOLVED")" == "$(readlink -f "$LIBDIR/libspecla.so.3")" ]] \
        || die "the installed specla program resolves libspecla.so.3 to '$RESOLVED', not the prefix's"
    echo "bin/specla: $OUT"
else
    echo "specla program: not built (SPECLA_BUILD_SAMPLES=OFF); skipped"
fi

# ---- (h) no AVX outside the dispatched kernels ---------------------------------------------------
step "(h) x86-64: AVX instructions only in the kernels' x86-64-v3 clones"
if objdump -f "$LIB" | grep -q 'architecture: i386:x86-64'; then
    # Functions (by symbol) with a VEX/EVEX instruction or a ymm/zmm register, except the clones
    # that target_clones names *.arch_x86_64_v3 (GCC) or *.arch_x86-64-v3.N (Clang).
    AVX_FNS=$(objdump -d --no-show-raw-insn "$LIB" | awk '
        /^[0-9a-f]+ <.*>:$/ { fn = $2; next }
        fn ~ /\.arch_x86[-_]64[-_]v3/ { next }
        /:\tv[a-z0-9]+[ \t].*%[xyz]mm/ || /%[yz]mm/ { bad[fn]++ }
        END { for (f in bad) print bad[f], f }')
    [[ -z "$AVX_FNS" ]] \
        || die "AVX code outside the dispatched kernels (SIGILL on CPUs without AVX): $(head -n 10 <<<"$AVX_FNS" | tr '\n' ' ')"
    CLONES=$(objdump -d --no-show-raw-insn "$LIB" | grep -cE '^[0-9a-f]+ <.*\.arch_x86[-_]64[-_]v3[^>]*>:$' || true)
    [[ "$CLONES" -gt 0 ]] || die "no x86-64-v3 kernel clones in the library (the AVX2 path is gone)"
    echo "no AVX outside $CLONES x86-64-v3 kernel clones"
    QEMU=$(command -v qemu-x86_64-static || command -v qemu-x86_64 || true)
    if [[ -n "$QEMU" && -x "$PREFIX/bin/specla" ]]; then
        NATIVE=$(env -i PATH=/usr/bin:/bin "$PREFIX/bin/specla" generate --model "$MODEL" --tokens 1,2,3 --max-tokens 5 --quiet)
        OLD_CPU=$(env -i PATH=/usr/bin:/bin "$QEMU" -cpu Nehalem "$PREFIX/bin/specla" generate --model "$MODEL" \
                  --tokens 1,2,3 --max-tokens 5 --quiet 2>&1) \
            || die "the installed program fails on a CPU without AVX (qemu -cpu Nehalem): $OLD_CPU"
        [[ "$OLD_CPU" == "$NATIVE" ]] || die "without AVX the program generates '$OLD_CPU', natively '$NATIVE'"
        echo "qemu -cpu Nehalem: $OLD_CPU (as natively)"
    else
        echo "qemu-x86_64 or the specla program not found; the run on a CPU without AVX is skipped"
    fi
else
    echo "not an x86-64 library; skipped"
fi

# ---- (i) the CUDA module ----------------------------------------------------------------------------
step "(i) no CUDA dependency of libspecla; the CUDA module beside it"
CUDA_NEEDED=$(objdump -p "$LIB" | awk '$1 == "NEEDED" { print $2 }' | grep -E '^lib(cublas|cublasLt|cudart|cuda)\.so' || true)
[[ -z "$CUDA_NEEDED" ]] || die "the installed libspecla.so needs CUDA libraries: $(tr '\n' ' ' <<<"$CUDA_NEEDED")"
if [[ "$CUDA_MODULE" != "-" ]]; then
    [[ -f "$LIBDIR/$CUDA_MODULE" ]] || die "the CUDA module $CUDA_MODULE is not installed in $LIBDIR"
    MODULE_NEEDED=$(objdump -p "$LIBDIR/$CUDA_MODULE" | awk '$1 == "NEEDED" { print $2 }')
    grep -q '^libcublas\.so' <<<"$MODULE_NEEDED" \
        || die "the installed CUDA module does not link cuBLAS"
    echo "CUDA module: $LIBDIR/$CUDA_MODULE"
else
    [[ -z "$(find "$PREFIX" -name 'libspecla_cuda*')" ]] || die "a build without CUDA installed a CUDA module"
    echo "no CUDA in this build"
fi

echo "install test: all checks passed"
