#!/usr/bin/env bash
# pmrkit's one entry point for newcomers and CI.
#
#   ./run.sh bench [--quick] [--strategy SPEC] [--workload NAME] ...   the strategy comparison
#   ./run.sh replay TRACE [--strategy SPEC] [--quick] [--sweep] ...     replay a recorded program
#   ./run.sh test                                                      build and run every test
#   ./run.sh compare OLD.json NEW.json                                 compare two benchmark runs
#
# Each command first installs the Debian packages pmrkit needs (with apt-get when run as root;
# otherwise it prints the exact apt-get line and stops), then configures and builds in build/
# (compare builds nothing and needs only SciPy and NumPy; replay first checks that TRACE can be
# read). --help prints this.
# CI-only stages, also usable by hand: sanitize (ASan+UBSan, then ThreadSanitizer on the
# concurrent tests), fuzz [SECONDS] (libFuzzer targets, bounded), consumer (install the package,
# check its exported link interface, build tests/consumer against it with CMake and pkg-config),
# shared (the same with -DBUILD_SHARED_LIBS=ON, after the tests in that build).
set -euo pipefail
readonly caller_dir=$PWD  # files named relative to where ./run.sh was called from
cd "$(dirname "$0")"
readonly self=$PWD/$(basename "$0")

# A path as the caller meant it: relative ones from where ./run.sh was called.
from_caller() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$caller_dir/$1" ;;
  esac
}

readonly packages=(
  g++ clang cmake ninja-build pkg-config
  libboost-dev libmimalloc-dev catch2 libbenchmark-dev
  libbson-dev libzstd-dev zstd libprotobuf-dev protobuf-compiler
  python3-scipy python3-matplotlib python3-numpy python3-pymongo
  libjemalloc2 libtcmalloc-minimal4 bsdutils libclang-rt-14-dev heaptrack
)

ensure_packages() {  # ensure_packages [PACKAGE...]: those given, or all of the above
  local wanted=("$@") missing=()
  [ ${#wanted[@]} -eq 0 ] && wanted=("${packages[@]}")
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "pmrkit needs these Debian packages; install them as root, then run this again:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "Installing: ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() {  # build DIR [cmake options...]
  local dir=$1; shift
  # CI holds the code to zero warnings; a newcomer's build should not stop on a new compiler's.
  local strict=OFF
  [ "${CI:-}" = true ] && strict=ON
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPMRKIT_WARNINGS_AS_ERRORS=$strict "$@" >/dev/null
  cmake --build "$dir"
}

# The CI-only stages hold their builds to zero warnings wherever they run, so a developer who
# runs one by hand sees what CI will: a sanitizer's own warnings (GCC's -Wtsan) appear only in
# these builds, and once stopped a CI run that every local run had passed.
build_strict() {  # build_strict DIR [cmake options...]
  CI=true build "$@"
}

# Installs what build DIR holds into a scratch prefix and builds tests/consumer against it, with
# CMake and with pkg-config, as a user of the installed package would.
check_consumer() {  # check_consumer DIR
  consumer_prefix=$(mktemp -d)  # global: the exit trap runs after this function has returned
  trap 'rm -rf "$consumer_prefix"' EXIT  # each run left a whole install tree in /tmp
  cmake --install "$1" --prefix "$consumer_prefix" >/dev/null
  cmake -DPREFIX="$consumer_prefix" -P tests/consumer/check_exported_link_interface.cmake
  tests/consumer/build_with_cmake.sh "$consumer_prefix" "$1-consumer"
  tests/consumer/build_with_pkg_config.sh "$consumer_prefix" "$1-consumer-pkg-config"
}

# The header comment above, the lines after the shebang up to the first that is not a comment.
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$self"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  bench)
    ensure_packages
    build build -DPMRKIT_BUILD_TESTS=OFF
    exec /usr/bin/python3 bench/report/run.py --bench build/bench/pmrkit_bench --out out "$@"
    ;;
  replay)
    if [ $# -lt 1 ]; then
      echo "usage: ./run.sh replay TRACE [--strategy SPEC]... [--quick] [--sweep]" \
           "[--repetitions N]" >&2
      exit 2
    fi
    trace=$(from_caller "$1"); shift
    if [ ! -r "$trace" ] || [ -d "$trace" ]; then  # before a build of several minutes
      echo "run.sh replay: cannot read the trace $trace" >&2
      exit 2
    fi
    ensure_packages
    build build -DPMRKIT_BUILD_TESTS=OFF
    exec /usr/bin/python3 bench/report/replay.py "$trace" --replay build/trace/pmrkit-replay \
      --out out/replay "$@"
    ;;
  test)
    ensure_packages
    build build -DPMRKIT_BUILD_TESTS=ON
    ctest --test-dir build --output-on-failure -j2
    ;;
  compare)
    if [ $# -lt 2 ]; then
      echo "usage: ./run.sh compare OLD.json NEW.json [--workload NAME] [--csv FILE]" >&2
      exit 2
    fi
    ensure_packages python3-scipy python3-numpy  # all it reads two JSON files with
    # The runs and a --csv file are named from where ./run.sh was called, not from here.
    args=()
    while [ $# -gt 0 ]; do
      case $1 in
        --csv) args+=("$1" "$(from_caller "${2:?--csv needs a FILE}")"); shift 2 ;;
        --csv=*) args+=("--csv=$(from_caller "${1#--csv=}")"); shift ;;
        --workload) args+=("$1" "${2:?--workload needs a NAME}"); shift 2 ;;
        -*) args+=("$1"); shift ;;
        *) args+=("$(from_caller "$1")"); shift ;;
      esac
    done
    exec /usr/bin/python3 bench/report/compare.py "${args[@]}"
    ;;
  sanitize)
    ensure_packages
    # clang for this pass, so both compilers' warnings are checked (g++ builds the others).
    build_strict build-asan -DCMAKE_CXX_COMPILER=clang++ -DPMRKIT_SANITIZE=address,undefined \
      -DPMRKIT_BUILD_BENCH=OFF
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir build-asan --output-on-failure -j2
    build_strict build-tsan -DPMRKIT_SANITIZE=thread -DPMRKIT_BUILD_BENCH=OFF
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      ctest --test-dir build-tsan --output-on-failure -j2 -L concurrent
    ;;
  fuzz)
    ensure_packages
    seconds=${1:-60}
    build_strict build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DPMRKIT_BUILD_FUZZERS=ON \
      -DPMRKIT_BUILD_BENCH=OFF -DPMRKIT_BUILD_TESTS=OFF
    tests/fuzz/run_fuzzers.sh build-fuzz "$seconds"
    ;;
  consumer)
    ensure_packages
    build build -DPMRKIT_BUILD_TESTS=ON
    check_consumer build
    ;;
  shared)
    # Every other stage builds static archives; the README offers shared libraries too.
    ensure_packages
    build_strict build-shared -DBUILD_SHARED_LIBS=ON -DPMRKIT_BUILD_TESTS=ON \
      -DPMRKIT_BUILD_BENCH=OFF
    ctest --test-dir build-shared --output-on-failure -j2
    check_consumer build-shared
    ;;
  -h|--help|help)
    usage
    ;;
  *)
    [ -n "$cmd" ] && echo "run.sh: unknown command '$cmd'" >&2
    usage >&2
    exit 2
    ;;
esac
