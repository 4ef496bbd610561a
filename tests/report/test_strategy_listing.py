#!/usr/bin/python3
"""The report pipeline takes its strategies from the benchmark binary, and the one-place rule
reaches the benchmark.

    test_strategy_listing.py --bench build/bench/pmrkit_bench
        --bench-with-test-strategies build/bench/pmrkit_bench_with_test_strategies
        --test-strategy-list tests/strategies/list.txt

pmrkit_bench (what ./run.sh bench runs) must list its registry with capabilities and options
and no test-only strategy; the test build's variant must list every strategy of
tests/strategies/list.txt after the library's, and offer and run their benchmarks. Timings are
never asserted.
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "bench", "report")))

import results  # noqa: E402
import runner  # noqa: E402

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def listed_names(path):
    with open(path, encoding="utf-8") as f:
        lines = (line.split("#", 1)[0].strip() for line in f)
        return [line for line in lines if line]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", required=True)
    p.add_argument("--bench-with-test-strategies", required=True)
    p.add_argument("--test-strategy-list", required=True)
    args = p.parse_args(argv)
    test_only = listed_names(args.test_strategy_list)
    check(test_only, f"{args.test_strategy_list} names no strategy")

    library = runner.list_strategies(args.bench)
    names = [s["name"] for s in library]
    check(names and names[0] == results.BASELINE_STRATEGY,
          f"pmrkit_bench lists {names}: the baseline {results.BASELINE_STRATEGY} comes first")
    for s in library:
        check({"summary", "thread_safe", "uses_upstream", "reuses_memory", "bound_to_thread",
               "options"} <= set(s),
              f"{s['name']}: listed without its capabilities or options: {sorted(s)}")
        for o in s.get("options", []):
            check({"name", "kind", "default", "description"} <= set(o)
                  and (("allowed" in o) == (o["kind"] == "choice")),
                  f"{s['name']}: option listed incompletely: {o}")
    for name in test_only:
        check(name not in names, f"pmrkit_bench, which ./run.sh bench runs, lists {name}")

    with_tests = runner.strategy_names(args.bench_with_test_strategies)
    check(list(with_tests) == names + test_only,
          f"the test build's benchmark lists {list(with_tests)}; expected the library's "
          f"strategies, then {test_only}")
    for name in test_only:
        benchmarks = runner.list_benchmarks(args.bench_with_test_strategies, name)
        pairs = f"AllocPairs/{name}"
        if not check(pairs in benchmarks, f"no {pairs} among {benchmarks}"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            doc, failure = runner.run_one(args.bench_with_test_strategies,
                                          runner.Job(pairs, (f"--strategy={name}",)), 1, 0.001,
                                          os.path.join(tmp, "run.json"))
        check(failure is None and doc and doc["benchmarks"],
              f"{pairs} did not run: {failure}")

    for f in failures:
        print("FAILED:", f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
