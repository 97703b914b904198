# Cross-compiling for 64-bit Arm Linux with Debian's cross toolchain (g++-aarch64-linux-gnu) and
# the arm64 -dev packages installed beside the host's (dpkg --add-architecture arm64):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# tools/cross_check_aarch64.sh does this and runs the result under qemu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(SPECLA_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${SPECLA_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${SPECLA_CROSS_TRIPLE}-g++)

# Libraries and headers of the target only; programs (pkg-config, swig, ...) of the host.
# Debian's multiarch keeps arm64 libraries in /usr/lib/aarch64-linux-gnu, headers in /usr/include.
set(CMAKE_FIND_ROOT_PATH /usr/${SPECLA_CROSS_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${SPECLA_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config (PCRE2) must report the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${SPECLA_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# Programs built here run under qemu (ctest, try_run) where it is installed.
find_program(SPECLA_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(SPECLA_QEMU_AARCH64)
  # The C library of the same package as the loader (see tools/cross_check_aarch64.sh).
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SPECLA_QEMU_AARCH64} -L /usr/${SPECLA_CROSS_TRIPLE}
      -E LD_LIBRARY_PATH=/usr/${SPECLA_CROSS_TRIPLE}/lib)
endif()
