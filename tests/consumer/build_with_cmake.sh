#!/usr/bin/env bash
# Builds and runs tests/consumer against an installed pmrkit with find_package, its third-party
# libraries found through CMAKE_PREFIX_PATH rather than the linker's default paths:
#   tests/consumer/build_with_cmake.sh PREFIX BUILD_DIR
# BUILD_DIR/dependencies becomes a second prefix holding libbson's and libzstd's own CMake
# packages (copied: they locate their files relative to themselves) and the libraries and
# headers of libbson, libzstd and libprotobuf (linked to Debian's). CMAKE_PREFIX_PATH lists
# it first, so every package pmrkitConfig.cmake finds resolves there, and the consumer's link
# line must name those libraries by their path in it: a bare -lbson-1.0 would be the linker
# searching its default paths, which a library installed elsewhere is not in.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PREFIX BUILD_DIR" >&2; exit 2; }
prefix=$(cd "$1" && pwd) build=$2
here=$(cd "$(dirname "$0")" && pwd)
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
system_lib=/usr/lib/$arch

rm -rf "$build"
deps=$(mkdir -p "$build/dependencies" && cd "$build/dependencies" && pwd)
mkdir -p "$deps/lib/$arch/cmake" "$deps/include"
for package in bson-1.0 zstd; do
  cp -r "$system_lib/cmake/$package" "$deps/lib/$arch/cmake/"
done
for library in "$system_lib"/libbson*.{so,a}* "$system_lib"/libzstd.{so,a}* \
               "$system_lib"/libprotobuf.{so,a}*; do
  [ -e "$library" ] && ln -s "$library" "$deps/lib/$arch/"
done
for header_dir in libbson-1.0 google zstd.h zstd_errors.h zdict.h; do
  [ -e "/usr/include/$header_dir" ] && ln -s "/usr/include/$header_dir" "$deps/include/"
done

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$deps;$prefix" >/dev/null
cmake --build "$build"

link_line=$(ninja -C "$build" -t commands pmrkit_consumer | tail -n 1)
if ls "$prefix"/lib*/libpmrkit.so* >/dev/null 2>&1 || ls "$prefix"/lib/*/libpmrkit.so* >/dev/null 2>&1; then
  # A shared install (BUILD_SHARED_LIBS): its libraries carry their third parties, so the
  # consumer's link names only pmrkit's; the run below checks that they load.
  echo "consumer: a shared install; the link names pmrkit's libraries only"
else
  missing=()
  for library in libbson-1.0.so libzstd.so libprotobuf.so; do
    # Ninja writes paths inside the build directory relative to it.
    [[ $link_line == *"dependencies/lib/$arch/$library"* ]] || missing+=("$library")
  done
  if [ ${#missing[@]} -ne 0 ]; then
    echo "consumer: the link line does not take ${missing[*]} from $deps (CMAKE_PREFIX_PATH):" >&2
    echo "$link_line" >&2
    exit 1
  fi
  echo "consumer: libbson, libzstd and libprotobuf linked from CMAKE_PREFIX_PATH ($deps)"
fi
"$build/pmrkit_consumer"
