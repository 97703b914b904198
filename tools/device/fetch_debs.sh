#!/usr/bin/env bash
# Run HERE (a machine with network access): downloads the Debian packages that the GPU machine of
# the device tool lacks for building SpecLA into .deps/debs (git-ignored), so that they travel
# with the working tree. tools/device/run_on_device.sh unpacks them there.
#
#   mimalloc        find_package(mimalloc) + the shared library at run time
#   pcre2 (8-bit)   pkg_check_modules(libpcre2-8); libpcre2-dev's .so links also name the
#                   16/32-bit and posix libraries, so those come too (small)
#   doctest         find_package(doctest) for the test programs
#   nlohmann-json   find_package(nlohmann_json)
#   CLI11           the specla CLI sample (not built on the device, fetched for completeness)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/.deps/debs"
mkdir -p "$out"
cd "$out"
rm -f ./*.deb
apt-get download libmimalloc-dev libmimalloc2.0 \
    libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
    doctest-dev nlohmann-json3-dev libcli11-dev
ls -la "$out"
du -sh "$out"
