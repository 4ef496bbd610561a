#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD_DIR (tests/fuzz/pmrkit_fuzz_<name>) for SECONDS
# each, on a copy of its seed corpus (tests/fuzz/corpus/<name>/, so the repository is not
# touched), with a memory bound, and prints per target the executions and the corpus size.
# Exits non-zero if any target crashed, leaked, timed out or ran out of memory; the input that
# did it is kept in BUILD_DIR/fuzz-artifacts/ (turn it into a regression: copy it to
# tests/fuzz/regressions/<name>/, which the Catch2 replay tests run on every build).
#
#   tests/fuzz/run_fuzzers.sh build-fuzz 60
set -euo pipefail

build=${1:?usage: run_fuzzers.sh BUILD_DIR SECONDS}
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
artifacts="$(cd "$build" && pwd)/fuzz-artifacts"
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shopt -s nullglob
targets=("$build"/tests/fuzz/pmrkit_fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
  echo "run_fuzzers.sh: no pmrkit_fuzz_* targets in $build/tests/fuzz" \
       "(configure with -DPMRKIT_BUILD_FUZZERS=ON)" >&2
  exit 2
fi

failed=0
summary=()
for exe in "${targets[@]}"; do
  name=${exe##*/pmrkit_fuzz_}
  seeds="$here/corpus/$name"
  if [ ! -d "$seeds" ]; then
    echo "run_fuzzers.sh: target $name has no seed corpus in $seeds" >&2
    failed=1
    summary+=("$(printf '%-16s %14s  %s' "$name" "-" "FAILED: no seed corpus")")
    continue
  fi
  corpus="$work/$name"
  mkdir -p "$corpus"
  cp -r "$seeds"/. "$corpus"/
  args=(-max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10
        -print_final_stats=1 -artifact_prefix="$artifacts/$name-")
  [ -f "$here/dict/$name.dict" ] && args+=(-dict="$here/dict/$name.dict")
  log="$work/$name.log"
  echo "--- fuzzing $name for ${seconds}s"
  status=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$exe" "${args[@]}" "$corpus" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  units=$(ls "$corpus" | wc -l)
  if [ $status -ne 0 ]; then
    failed=1
    echo "!!! $name failed (exit $status); the end of its log:" >&2
    tail -40 "$log" >&2
    summary+=("$(printf '%-16s %14s  %s' "$name" "${execs:-?}" \
                 "FAILED (exit $status), input kept in $artifacts/")")
  else
    summary+=("$(printf '%-16s %14s  corpus %s inputs' "$name" "${execs:-?}" "$units")")
  fi
done

echo
printf '%-16s %14s\n' "target" "executions"
printf '%s\n' "${summary[@]}"
if [ $failed -ne 0 ]; then
  echo "fuzzing FAILED" >&2
  exit 1
fi
echo "fuzzing: no crashes in ${seconds}s per target"
