#!/usr/bin/python3
"""pmrkit_bench's rows on several threads measure memory as their rows on one thread do.

    test_threaded_rows.py build/bench/pmrkit_bench

AllocMixedShared counts its live bytes on one thread (the counting pass), whatever the row's
threads, so a row on two threads must report the held memory of that pass too, not the timed
pass's two threads against one thread's live bytes (bench_support.hpp). For size_class, whose
held memory is what it took from upstream, the threads:2 row must then hold what the threads:1
row holds (each pass a new resource over the same one-thread workload), where the two threads'
held memory was twice it: 8.1 MB against 4.1 when this was written. Checks:
  - both rows report peak held and peak live, with the same live peak;
  - the threads:2 row's peak held is within a quarter of the threads:1 row's;
  - the thread-safe rows run at 2, 4, ... threads up to the machine's hardware threads, and at 2
    at least;
  - the container rows run on one count of threads beyond one, the largest of those, for the
    rows that have something to share (check_container_rows), and hold as on one thread.
No timing is asserted.
"""

import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(bench, *args):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        done = subprocess.run([bench, *args, f"--benchmark_out={out}",
                               "--benchmark_out_format=json"],
                              capture_output=True, text=True, timeout=100, env=env)
        if done.returncode != 0:
            raise SystemExit(f"FAIL: exit {done.returncode}: {done.stderr[-2000:]}")
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def check_container_rows(bench, cores):
    """The container rows on every core: one thread count, the most a doubling from 2 reaches;
    pooled (one resource for all the threads) for thread-safe strategies, shared (a resource per
    op on each thread over one pool) for those over upstream, fresh only for the baseline and
    the rival; none for the debugging strategy. Held memory as on one thread."""
    top = 2
    while top * 2 <= cores:
        top *= 2
    listed = subprocess.run([bench, "--benchmark_list_tests",
                             "--benchmark_filter=^ContainerDocument/build/"],
                            capture_output=True, text=True, timeout=60).stdout.split()
    prefix, suffix = "ContainerDocument/build/", f"/manual_time/threads:{top}"
    threaded = {n[len(prefix):-len(suffix)] for n in listed if n.endswith(suffix)}
    check(all(n.endswith(suffix) or "threads:" not in n for n in listed),
          f"container rows at other thread counts than {top}: {listed}")
    for row in ("new_delete/fresh", "mimalloc_plain/fresh", "size_class/pooled",
                "size_class/shared", "size_class_unsync/shared", "monotonic/shared",
                "std_sync_pool/pooled"):
        check(row in threaded, f"no threaded row {row}: {sorted(threaded)}")
    for row in ("new_delete/pooled", "mimalloc_plain/pooled", "size_class/fresh",
                "size_class_unsync/pooled", "monotonic/pooled", "checked/pooled",
                "checked/shared"):
        check(row not in threaded, f"threaded row {row}, which is not one")

    doc = run(bench, "--benchmark_filter=^ContainerDocument/build/size_class/(pooled|shared)/"
              f"manual_time(/threads:{top})?$", "--benchmark_min_time=0.02")
    rows = {e["name"]: e for e in doc["benchmarks"]}
    for variant in ("pooled", "shared"):
        one = rows.get(f"{prefix}size_class/{variant}/manual_time", {})
        many = rows.get(f"{prefix}size_class/{variant}{suffix}", {})
        check(one and many, f"size_class/{variant}: rows missing from {sorted(rows)}")
        if not (one and many):
            continue
        check(one.get("peak_live_bytes", 0) > 0 and
              one.get("peak_live_bytes") == many.get("peak_live_bytes"),
              f"size_class/{variant}: live peaks {one.get('peak_live_bytes')} and "
              f"{many.get('peak_live_bytes')}")
        held_one, held_many = one.get("peak_held_bytes", 0), many.get("peak_held_bytes", 0)
        check(held_one > 0 and 0.75 * held_one <= held_many <= 1.25 * held_one,
              f"size_class/{variant}: threads:{top} holds {held_many} bytes, one thread "
              f"{held_one}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    bench = sys.argv[1]

    listed = subprocess.run([bench, "--benchmark_list_tests",
                             "--benchmark_filter=^AllocMixedShared/size_class/"],
                            capture_output=True, text=True, timeout=60).stdout.split()
    cores = max(2, os.cpu_count() or 1)
    expected = ["AllocMixedShared/size_class/real_time/threads:1"]
    threads = 2
    while threads <= cores:
        expected.append(f"AllocMixedShared/size_class/real_time/threads:{threads}")
        threads *= 2
    check(listed == expected, f"thread-safe rows {listed}, expected {expected}")

    doc = run(bench, "--benchmark_filter=^AllocMixedShared/size_class/real_time/threads:[12]$",
              "--benchmark_min_time=0.05")
    rows = {e["name"].rsplit(":", 1)[1]: e for e in doc["benchmarks"]}
    check(set(rows) == {"1", "2"}, f"rows {sorted(rows)}")
    if set(rows) == {"1", "2"}:
        one, two = rows["1"], rows["2"]
        for row, name in ((one, "threads:1"), (two, "threads:2")):
            check(row.get("peak_held_bytes", 0) > 0 and row.get("peak_live_bytes", 0) > 0,
                  f"{name}: no peak held or live: {row}")
        check(one.get("peak_live_bytes") == two.get("peak_live_bytes"),
              f"live peaks differ: {one.get('peak_live_bytes')} and {two.get('peak_live_bytes')}")
        held_one, held_two = one.get("peak_held_bytes", 0), two.get("peak_held_bytes", 0)
        check(0.75 * held_one <= held_two <= 1.25 * held_one,
              f"threads:2 holds {held_two} bytes, threads:1 {held_one}: the two threads' "
              "held memory against one thread's live bytes")

    check_container_rows(bench, cores)

    if failures:
        for f in failures:
            print("FAIL:", f)
        return 1
    print("threaded rows: memory measured as on one thread; thread counts up to the cores; "
          "container rows on every core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
