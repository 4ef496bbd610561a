#!/usr/bin/python3
"""Compare two benchmark runs, benchstat style: NEW against OLD, row by row.

    bench/report/compare.py OLD.json NEW.json [--csv FILE] [--workload NAME]

OLD and NEW are Google Benchmark JSON files: run.py's results.json, or any pmrkit_bench run
with --benchmark_out=FILE --benchmark_out_format=json (use --benchmark_repetitions=5 or more:
the Mann-Whitney U test needs repetitions to call a difference). Each table shows, per
strategy/variant row, OLD's and NEW's medians and NEW's delta, or "~" where the test finds no
difference (p >= 0.05); allocs/op and B/op, counted in one process per row, show their change
with no p-value. Rows present in one file only show "-" on the other side. Where both runs hold
the container ops in one process (run.py's last tables), their ratios to mimalloc_plain follow,
OLD -> NEW, with a U test over the processes' median ratios (each process one sample; not the
rounds, which share their process), untested below three processes a side.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import analysis  # noqa: E402
import in_process  # noqa: E402
import results  # noqa: E402
import summary_csv  # noqa: E402
import tables  # noqa: E402


def main(argv: list[str]) -> int:
    sys.stdout.reconfigure(errors="replace")
    p = argparse.ArgumentParser(prog="compare.py", description=__doc__.split("\n\n")[0])
    p.add_argument("old", metavar="OLD.json")
    p.add_argument("new", metavar="NEW.json")
    p.add_argument("--csv", metavar="FILE", help="also write the comparison as CSV")
    p.add_argument("--workload", action="append", default=[], metavar="NAME",
                   help="only this workload or pattern (repeatable)")
    args = p.parse_args(argv)

    old, new = results.load(args.old), results.load(args.new)
    compared = analysis.analyze_compare(old, new)
    if args.workload:
        wanted = {w.lower() for w in args.workload}
        compared = [t for t in compared if t.workload.lower() in wanted
                    or t.workload.split("/", 1)[0].lower() in wanted]
    if not compared:
        print("compare.py: no benchmarks to compare", file=sys.stderr)
        return 1
    print(f"old: {args.old}\nnew: {args.new}\n")
    print(tables.render_all(compared), end="")
    one_process = in_process.render_compare(old.context.get(in_process.CONTEXT_FIELD),
                                            new.context.get(in_process.CONTEXT_FIELD),
                                            args.workload)
    if one_process:
        print("\n" + one_process, end="")
    if args.csv:
        summary_csv.write(args.csv, compared)
    only_one = [t.title for t in compared
                if any(r.old == {} for r in t.rows) or any(r.summary == {} for r in t.rows)]
    if only_one:
        print(f"\nrows present in one run only (shown as -): {', '.join(only_one)}",
              file=sys.stderr)
    # A run that reported an error has no figures: say why a row lacks them.
    for note in old.error_notes("OLD: ") + new.error_notes("NEW: "):
        print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
