#!/usr/bin/python3
"""pmrkit_bench's timed processes run without the heap counter, and the counter still counts.

    test_heap_counter.py --bench build/bench/pmrkit_bench
                         --counter build/bench/libpmrkit_heap_counter.so

Issue 11: an interposer costs its forwarding call even with counting off (1.33x on AllocPairs/
malloc), so the executable must not define malloc or operator new itself; allocs/op come from a
separate process with libpmrkit_heap_counter.so preloaded (docs/benchmarks.md, "How allocations
are counted"). Checks:
  - the executable's dynamic symbol table defines none of the allocation functions;
  - without the counter, a row reports its memory (peak live, peak held) and its page faults
    per op, and no allocs/op, rather than a count of zero that reads as "allocates nothing";
  - with the counter preloaded, AllocPairs/new_delete counts its one allocation of 64 bytes
    per op, and AllocPairs/bare_list (which takes its memory once) none;
  - with the counter preloaded, a container workload on a pool reused across ops that keeps
    all it takes (ContainerMap/build/std_unsync_pool/pooled) counts no allocation: the workload
    itself (its inputs, temporaries, the map object) must not put heap allocations on every
    strategy's row. (Not size_class: it may exchange an empty chunk of one size for another at
    its high-water mark, docs/size_class.md, so its count is the pool's own and not zero.)
  - with the counter preloaded, a request arena per op over the shared pool
    (ContainerMap/build/size_class/shared) takes its memory from the pool, not the heap: a
    quarter of the fresh row's allocations at most (472 an op fresh, 17 shared when written);
    and only strategies that take memory from upstream have shared rows;
  - with the counter preloaded in front of an allocator (jemalloc, if installed), the counter's
    forwarding reaches that allocator and still counts.
Counts are asserted, never times.
"""

import argparse
import json
import os
import subprocess
import sys

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
ALLOCATION_FUNCTIONS = {"malloc", "free", "calloc", "realloc", "memalign", "aligned_alloc",
                        "posix_memalign", "_Znwm", "_ZdlPv", "_ZnwmSt11align_val_t"}
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def defined_symbols(binary):
    out = subprocess.run(["nm", "-D", "--defined-only", binary], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def run_row(bench, name, preload=""):
    env = dict(os.environ)
    env.pop("PMRKIT_STRATEGY", None)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    done = subprocess.run([bench, f"--benchmark_filter=^{name}$", "--benchmark_min_time=0.001",
                           "--benchmark_format=json"], capture_output=True, text=True, env=env,
                          timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"FAIL: {name} with LD_PRELOAD={preload!r} exited {done.returncode}:\n"
                         f"{done.stderr[-2000:]}")
    entries = [e for e in json.loads(done.stdout)["benchmarks"] if e["name"] == name]
    if len(entries) != 1:
        raise SystemExit(f"FAIL: {name}: expected one result, got {len(entries)}")
    return entries[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--counter", required=True)
    args = p.parse_args()

    interposed = sorted(ALLOCATION_FUNCTIONS & defined_symbols(args.bench))
    check(not interposed, f"{args.bench} defines {', '.join(interposed)}: the timed processes "
          "would run every allocation through an interposer")
    check(os.path.exists(args.counter), f"{args.counter} was not built")

    plain = run_row(args.bench, "AllocPairs/new_delete")
    check("allocs_per_op" not in plain and "bytes_per_op" not in plain,
          f"without the counter, allocs/op and B/op must be absent, got {plain}")
    check(plain.get("peak_live_bytes") == 64, f"peak live without the counter: {plain}")
    check("peak_held_bytes" in plain, f"no peak held without the counter: {plain}")
    check(plain.get("faults_per_op", -1) >= 0, f"no faults/op: {plain}")

    listed = subprocess.run([args.bench, "--benchmark_list_tests=true",
                             "--benchmark_filter=^ContainerMap/build/"], capture_output=True,
                            text=True, check=True, timeout=120).stdout.split()
    shared = {name.split("/")[2] for name in listed if "/shared/" in name}
    check("size_class" in shared and "monotonic" in shared,
          f"no shared rows for strategies that take memory from upstream: {sorted(shared)}")
    check(not shared & {"new_delete", "malloc", "mimalloc", "mimalloc_plain"},
          f"shared rows for strategies that ignore upstream: {sorted(shared)}")

    if os.path.exists(args.counter):
        counted = run_row(args.bench, "AllocPairs/new_delete", args.counter)
        check(counted.get("allocs_per_op") == 1 and counted.get("bytes_per_op") == 64,
              f"AllocPairs/new_delete with the counter: expected 1 alloc and 64 B per op, "
              f"got {counted}")
        floor = run_row(args.bench, "AllocPairs/bare_list", args.counter)
        check(floor.get("allocs_per_op") == 0, f"AllocPairs/bare_list counted: {floor}")
        pooled = run_row(args.bench, "ContainerMap/build/std_unsync_pool/pooled/manual_time",
                         args.counter)
        check(pooled.get("allocs_per_op") == 0,
              f"ContainerMap/build/std_unsync_pool/pooled counted heap allocations that are not "
              f"the pool's: {pooled}")
        fresh = run_row(args.bench, "ContainerMap/build/size_class/fresh/manual_time",
                        args.counter)
        arena = run_row(args.bench, "ContainerMap/build/size_class/shared/manual_time",
                        args.counter)
        check(fresh.get("allocs_per_op", 0) > 100 and
              arena.get("allocs_per_op", float("inf")) * 4 < fresh["allocs_per_op"],
              f"a request arena over the shared pool took its memory from the heap: "
              f"fresh {fresh}, shared {arena}")
        # A fresh row's op makes its resource (one allocation, the strategy's), and nothing of
        # the harness's: not the object that holds the resource, nor the counting wrapper.
        op_pooled = run_row(args.bench, "ContainerMap/build/new_delete/pooled/manual_time",
                            args.counter)
        op_fresh = run_row(args.bench, "ContainerMap/build/new_delete/fresh/manual_time",
                           args.counter)
        check(op_fresh.get("allocs_per_op", 0) - op_pooled.get("allocs_per_op", 0) == 1,
              f"ContainerMap/build/new_delete: fresh {op_fresh.get('allocs_per_op')} allocs/op, "
              f"pooled {op_pooled.get('allocs_per_op')}: a fresh op should add its resource "
              "alone")
        if os.path.exists(JEMALLOC):
            behind = run_row(args.bench, "AllocPairs/malloc", f"{args.counter}:{JEMALLOC}")
            check(behind.get("allocs_per_op") == 1,
                  f"AllocPairs/malloc with the counter in front of jemalloc: {behind}")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: no interposer in pmrkit_bench; the preloaded counter counts")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
