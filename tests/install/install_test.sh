#!/usr/bin/env bash
# Installs the current build into a temporary prefix and uses it as a downstream project would:
#   (a) pkg-config flags build and run samples/c/hello.c (C99, -Wall -Werror), also through its
#       Makefile;
#   (b) a CMake project finds it with find_package(SpecLA) and builds and runs;
#   (c) the shared library exports only specla_* symbols;
#   (d) its SONAME is libspecla.so.<SPECLA_ABI_VERSION> (0);
#   (e) the installed header compiles as C99 -pedantic and as C++;
#   (f) the Java and C# bindings, where they were built, compile their samples against the
#       installed jar / assembly and run them on the shipped model.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [CC] [CXX] [CMAKE] [CONFIG]
set -euo pipefail

BUILD=${1:?build dir}
SRC=${2:?source dir}
CC=${3:-cc}
CXX=${4:-c++}
CMAKE=${5:-cmake}
CONFIG=${6:-}
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
LD_LIBRARY_PATH="$LIBDIR" ldd "$WORK/hello" | grep -q "$LIBDIR/libspecla.so.0" \
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
[[ "$SONAME" == "libspecla.so.0" ]] || die "SONAME is '$SONAME', expected libspecla.so.0"
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

echo "install test: all checks passed"
