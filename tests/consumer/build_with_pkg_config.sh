#!/usr/bin/env bash
# Builds and runs the consumer program against an installed pmrkit using pkg-config alone, the
# way make and Meson users find Debian libraries:
#   tests/consumer/build_with_pkg_config.sh PREFIX WORK_DIR [C++ compiler]
# Once with the core (pkg-config pmrkit), once with the adapters (pmrkit-bson, pmrkit-zstd and
# pmrkit-protobuf, which brings pmrkit-datagram). No --static: the .pc files of static
# archives list what every link needs.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PREFIX WORK_DIR [CXX]" >&2; exit 2; }
prefix=$1 work=$2 cxx=${3:-${CXX:-c++}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"

pc_file=$(find "$prefix" -path '*/pkgconfig/pmrkit.pc' -print -quit)
[ -n "$pc_file" ] || { echo "no pkgconfig/pmrkit.pc under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc_file")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

build_and_run() {  # build_and_run NAME "SOURCES" "DEFINES" PACKAGES...
  local name=$1 sources=$2 defines=$3; shift 3
  local flags
  flags=$(pkg-config --cflags --libs "$@")
  echo "$name: pkg-config --cflags --libs $*: $flags"
  # shellcheck disable=SC2086  # the flags are words by design
  "$cxx" -std=c++20 $defines $sources -o "$work/$name" $flags
  "$work/$name"
}

build_and_run pmrkit_pkg_config_core "$here/main.cpp" "" pmrkit
build_and_run pmrkit_pkg_config_adapters "$here/main.cpp $here/adapters.cpp" \
  -DPMRKIT_CONSUMER_ADAPTERS=1 pmrkit-bson pmrkit-zstd pmrkit-protobuf
