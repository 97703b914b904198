#!/usr/bin/env bash
# From a fresh Debian 12 machine to generated tokens: installs the build dependencies (as root, or
# through sudo), builds SpecLA in ./build (Release; the CUDA backend too when nvcc is found) and runs
# the main job, `specla generate` on models/gdn-pycode-22m.
#
#   tools/quickstart.sh             everything
#   tools/quickstart.sh --deps      only install the dependencies (used by .ci/run)
#   tools/quickstart.sh --no-deps   build and run, assuming the dependencies are installed
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SPECLA_BUILD_DIR:-"$ROOT/build"}
MODEL="$ROOT/models/gdn-pycode-22m"

# The main job: continue a Python function header, as text, with speculative decoding (the
# prompt-lookup drafter; the output is exactly what plain greedy decoding gives).
JOB_ARGS=(--prompt $'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n' --max-tokens 96 --speculative)

# Debian packages the build and the tests need, with what each is for.
DEBIAN_PACKAGES=(
    cmake g++ make pkg-config binutils  # toolchain; pkg-config and nm/objdump for the install test
    libmimalloc-dev                     # host allocator of the engine
    libpcre2-dev                        # regular expressions of the tokenizer's pre-tokenizers
    nlohmann-json3-dev                  # config.json, safetensors headers, tokenizer.json
    libcli11-dev                        # argument parsing of the specla CLI
    doctest-dev                         # the test suites
    swig                                # language bindings: generates Java, C# and Go wrappers from bindings/specla.i
    default-jdk-headless                # Java binding: javac, jar, JNI headers, the JVM that runs its test
    mono-mcs mono-runtime               # C# binding: the mcs compiler and the mono runtime for its test
    golang-go                           # Go binding: the go command (cgo) that builds the package and its test
)

install_deps() {
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${DEBIAN_PACKAGES[@]}"
}

# nvcc is not on PATH by default in the CUDA toolkit's packages.
cuda_path() {
    if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
        export PATH="/usr/local/cuda/bin:$PATH"
    fi
}

build() {
    cuda_path
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECLA_CUDA=AUTO
    cmake --build "$BUILD" -j"$(nproc)"
}

run_job() {
    local backend=cpu
    # The CUDA backend when this build has it and the machine has a GPU.
    if grep -Eq '^CMAKE_CUDA_COMPILER:[A-Z]+=/' "$BUILD/CMakeCache.txt" 2>/dev/null && [[ -e /dev/nvidiactl ]]; then
        backend=cuda
    fi
    echo "== specla generate --model models/gdn-pycode-22m --backend $backend ${JOB_ARGS[*]}"
    "$BUILD/samples/specla" generate --model "$MODEL" --backend "$backend" "${JOB_ARGS[@]}"
}

case "${1:-}" in
    --deps) install_deps ;;
    --no-deps) build && run_job ;;
    "") install_deps && build && run_job ;;
    *)
        echo "usage: $0 [--deps | --no-deps]" >&2
        exit 2
        ;;
esac
