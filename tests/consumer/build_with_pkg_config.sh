#!/usr/bin/env bash
# Builds and runs the consumer program against an installed pmrkit using pkg-config alone, the
# way make and Meson users find Debian libraries:
#   tests/consumer/build_with_pkg_config.sh PREFIX WORK_DIR [C++ compiler]
# Once with the core (pkg-config pmrkit), once with the adapters (pmrkit-bson, pmrkit-zstd and
# pmrkit-protobuf, which brings pmrkit-datagram). No --static: the .pc files of static
# archives list what every link needs. Each program is linked with a run path to the install's
# libdir, as the README tells users of a shared build outside the loader's paths to do (a
# static build's programs need none, and the option costs them nothing).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PREFIX WORK_DIR [CXX]" >&2; exit 2; }
prefix=$1 work=$2 cxx=${3:-${CXX:-c++}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"

pc_file=$(find "$prefix" -path '*/pkgconfig/pmrkit.pc' -print -quit)
[ -n "$pc_file" ] || { echo "no pkgconfig/pmrkit.pc under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc_file")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

# build_and_run NAME DEFINE PACKAGE...: builds the files of the array `sources` and runs them.
build_and_run() {
  local name=$1 define=$2; shift 2
  local flags=()
  # pkg-config writes a space inside a path as "\ ", as the shell would: let the shell split
  # its output into words (the .pc files are the install's own, under test here).
  eval "flags=($(pkg-config --cflags --libs "$@"))"
  echo "$name: pkg-config --cflags --libs $*: ${flags[*]}"
  local libdir
  eval "libdir=$(pkg-config --variable=libdir pmrkit)"  # unescapes a space, as above
  # Absolute: the .pc files are relative to themselves, so a relative PKG_CONFIG_PATH gives a
  # relative libdir, which the loader would resolve from the current directory.
  libdir=$(cd "$libdir" && pwd -P)
  "$cxx" -std=c++20 ${define:+"$define"} "${sources[@]}" -o "$work/$name" "${flags[@]}" \
    "-Wl,-rpath,$libdir"
  "$work/$name"
}

sources=("$here/main.cpp")
build_and_run pmrkit_pkg_config_core "" pmrkit
sources=("$here/main.cpp" "$here/adapters.cpp")
build_and_run pmrkit_pkg_config_adapters -DPMRKIT_CONSUMER_ADAPTERS=1 \
  pmrkit-bson pmrkit-zstd pmrkit-protobuf
