#!/usr/bin/python3
"""The main benchmark job: run every workload under every strategy, then report.

    bench/report/run.py --bench build/bench/pmrkit_bench --out out/ [options]

Runs each benchmark of pmrkit_bench (fresh and pooled variants, the limit reference, the
Alloc* patterns) with repetitions, one process per repetition, the repetitions of the rows of
one table interleaved in random order, every process in the warm heap state (a live background
set, bench/heap_state.hpp), plus one short process per row with the heap counter preloaded for
allocs/op and B/op (the timed ones run without it); the fresh rows and the patterns again in an
idle process, with fewer repetitions, for the "idle time/op" column; and the malloc strategy's
fresh rows and patterns again under whole-process allocators (LD_PRELOAD jemalloc, tcmalloc,
mimalloc). Prints one table per
workload with deltas against new_delete/fresh and a Mann-Whitney U test, peak held memory and
held/live, and writes OUT/results.json (merged Google Benchmark JSON), OUT/summary.csv,
OUT/report.html and OUT/charts/*.png. Then, when the run has container workloads, the container
ops in one process (pmrkit_interleaved, in_process.py): each strategy of the run, pooled and
fresh (and shared, where it has such rows, in a process after them), beside mimalloc_plain in
processes of its own (four, seeds one apart), round by round,
one more table per container workload (and OUT/containers_in_one_process.csv). See
docs/benchmarks.md for how to read them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import analysis  # noqa: E402
import charts  # noqa: E402
import html_report  # noqa: E402
import in_process  # noqa: E402
import results  # noqa: E402
import runner  # noqa: E402
import summary_csv  # noqa: E402
import tables  # noqa: E402
from progress import Progress  # noqa: E402

# Budget (2 cores): ~690 rows by default (108 of them the container rows on every core), each
# repetition in a process of its own, plus one counting process per row and the idle runs:
# ~5,000 processes. A process costs about 1.5 * min_time (Google Benchmark's iteration-count
# search, whose last step is the measured run) plus start-up. Measured with these rows from a
# clean clone, one run each, about 4 minutes of it the build: `./run.sh bench` 44 min 22 s
# (5,151 benchmark runs in 40 min 55 s), `--quick` 11 min 20 s. The container ops in one
# process add under a minute (41 rounds, 10 processes of 3 subjects: 43 s).
# The two-sided U test can reach p < 0.05 from 4+4 repetitions (smallest p 2/70 = 0.029); 5+5
# (smallest p 0.008) still do with one pair out of order (p 0.016), where 4+4 would not (0.057).
DEFAULT_REPETITIONS = 5
DEFAULT_MIN_TIME = 0.05
QUICK_REPETITIONS = 3
QUICK_MIN_TIME = 0.01
# The idle runs are a figure beside the warm one, not a verdict: 3 repetitions (a median that
# one outlier does not move) of the ~110 fresh and pattern rows add about a quarter to the run.
DEFAULT_IDLE_REPETITIONS = 3
QUICK_IDLE_REPETITIONS = 1


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="run.py", description=__doc__.split("\n\n")[0],
        epilog="Environment: PMRKIT_STRATEGY is the default for --strategy.")
    p.add_argument("--bench", default="build/bench/pmrkit_bench", help="the pmrkit_bench binary")
    p.add_argument("--out", default="out", help="directory for results.json, summary.csv, "
                   "report.html and charts/ (default: out)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {QUICK_REPETITIONS} repetitions of {QUICK_MIN_TIME}s, "
                   "too few samples to call a time difference")
    # White space alone (an empty file's line break) is unset, as install_default_from_env reads it.
    p.add_argument("--strategy", default=os.environ.get("PMRKIT_STRATEGY", "").strip(),
                   metavar="SPEC", help="only this strategy (a spec such as "
                   "size_class:max_pooled=128K), plus the new_delete baseline and limit rows")
    p.add_argument("--workload", action="append", default=[], metavar="NAME",
                   help="only this workload or pattern (repeatable), e.g. InsertMultiple, "
                   "AllocMixedShared")
    p.add_argument("--no-preload", action="store_true",
                   help="skip the rows with the process allocator replaced via LD_PRELOAD")
    p.add_argument("--preload", action="append", default=[], metavar="NAME",
                   choices=[tag for tag, _, _ in runner.PRELOADS],
                   help="only this process allocator for the preload rows (repeatable)")
    p.add_argument("--repetitions", type=int, metavar="N",
                   help=f"repetitions per benchmark, each in a process of its own, interleaved "
                   f"with the other rows of its table (default {DEFAULT_REPETITIONS}, "
                   f"--quick {QUICK_REPETITIONS}); more make the verdicts surer")
    p.add_argument("--idle-repetitions", type=int, metavar="N",
                   help="repetitions of the fresh rows and patterns in an idle process (nothing "
                   "else on the heap), shown as 'idle time/op' beside the warm time "
                   f"(default {DEFAULT_IDLE_REPETITIONS}, --quick {QUICK_IDLE_REPETITIONS}; "
                   "0: warm only)")
    p.add_argument("--container-rounds", type=int, metavar="N",
                   help="rounds of the container ops in one process, every strategy of the run "
                   "pooled, fresh and shared against mimalloc_plain (pmrkit_interleaved next to "
                   f"--bench; default {in_process.DEFAULT_ROUNDS}, --quick "
                   f"{in_process.QUICK_ROUNDS}; 0: not run)")
    p.add_argument("--container-processes", type=int, metavar="N",
                   help="processes of those rounds for each strategy, seeds one apart, pooled "
                   "in its table; compare.py tests a change between two runs over the "
                   "processes' medians, which takes 4 a side (default "
                   f"{in_process.DEFAULT_PROCESSES}, --quick {in_process.QUICK_PROCESSES})")
    p.add_argument("--seed", type=int, metavar="N",
                   help="seed of the interleaving order (default: random; the run records it)")
    p.add_argument("--min-time", type=float, metavar="SECONDS",
                   help=f"Google Benchmark min time per repetition (default {DEFAULT_MIN_TIME}"
                   f", --quick {QUICK_MIN_TIME})")
    p.add_argument("--heap-counter", metavar="PATH",
                   help=f"the heap counter library, preloaded in one extra process per row to "
                   f"count allocs/op and B/op (default: {runner.HEAP_COUNTER} next to --bench; "
                   "without it those columns stay empty)")
    p.add_argument("--list", action="store_true", help="print what would run, and stop")
    p.add_argument("--from-json", metavar="FILE",
                   help="do not run anything: report on an existing results.json")
    args = p.parse_args(argv)
    if args.repetitions is None:
        args.repetitions = QUICK_REPETITIONS if args.quick else DEFAULT_REPETITIONS
    if args.min_time is None:
        args.min_time = QUICK_MIN_TIME if args.quick else DEFAULT_MIN_TIME
    if args.container_rounds is None:
        args.container_rounds = (in_process.QUICK_ROUNDS if args.quick
                                 else in_process.DEFAULT_ROUNDS)
    if args.container_processes is None:
        args.container_processes = (in_process.QUICK_PROCESSES if args.quick
                                    else in_process.DEFAULT_PROCESSES)
    if args.idle_repetitions is None:
        args.idle_repetitions = QUICK_IDLE_REPETITIONS if args.quick else DEFAULT_IDLE_REPETITIONS
    if args.repetitions < 1:
        p.error("--repetitions must be at least 1")
    if args.idle_repetitions < 0:
        p.error("--idle-repetitions must be 0 or more")
    if args.container_rounds < 0:
        p.error("--container-rounds must be 0 or more")
    if args.container_processes < 1:
        p.error("--container-processes must be at least 1")
    if args.min_time <= 0:
        p.error("--min-time must be positive")
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    if args.heap_counter is None:
        args.heap_counter = runner.heap_counter_next_to(args.bench)
    if args.no_preload:
        args.preloads = []
    elif args.preload:
        args.preloads = args.preload
    else:
        args.preloads = [tag for tag, _, _ in runner.PRELOADS]
    return args


def write_reports(out_dir: str, doc: dict, result_set: results.ResultSet,
                  notes: list[str], title: str = "pmrkit benchmarks") -> list[analysis.Table]:
    """Prints the tables and writes every file of the out directory; returns the tables."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    analyzed = analysis.analyze_run(result_set)
    text = tables.render_all(analyzed, result_set.context)
    one_process = in_process.render(result_set.context.get(in_process.CONTEXT_FIELD))
    if one_process:
        text += "\n" + one_process
    print(text, end="")
    with open(os.path.join(out_dir, "tables.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    summary_csv.write(os.path.join(out_dir, "summary.csv"), analyzed)
    if result_set.context.get(in_process.CONTEXT_FIELD):
        in_process.write_csv(os.path.join(out_dir, in_process.CSV_NAME),
                             result_set.context[in_process.CONTEXT_FIELD])
    chart_paths = charts.write_all(analyzed, os.path.join(out_dir, "charts"))
    html_report.write(os.path.join(out_dir, "report.html"), title, analyzed,
                      chart_paths, result_set.context, notes)
    return analyzed


def main(argv: list[str]) -> int:
    sys.stdout.reconfigure(errors="replace")
    args = parse_args(argv)
    if args.from_json:
        doc = json.load(open(args.from_json, encoding="utf-8"))
        result_set = results.from_json(doc)
        notes = doc.get("context", {}).get("pmrkit_notes", [])
        # Errors the runs reported (a row left without them) that the run's notes lack.
        notes = notes + [n for n in result_set.error_notes() if n not in notes]
        write_reports(args.out, doc, result_set, notes)
        for note in result_set.error_notes():
            print(note, file=sys.stderr)
        print(f"wrote {args.out}/summary.csv, report.html, charts/", file=sys.stderr)
        return 0

    try:
        known = runner.strategy_names(args.bench)
        plan = runner.plan(args.bench, known, strategy=args.strategy, workloads=args.workload,
                           preloads=args.preloads)
    except runner.BenchError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    counting = os.path.exists(args.heap_counter)
    if not counting:
        plan.notes.append(f"allocs/op and B/op not measured: no heap counter at "
                          f"{args.heap_counter} (build it: cmake --build build --target "
                          "pmrkit_heap_counter)")
    elif not runner.preloadable(args.heap_counter):
        counting = False
        plan.notes.append(f"allocs/op and B/op not measured: the heap counter's path "
                          f"{args.heap_counter} has a space or a colon, which LD_PRELOAD "
                          "cannot carry (build pmrkit under a path without them)")
    for note in plan.notes:
        print(note, file=sys.stderr)
    jobs = plan.jobs + (runner.idle_jobs(plan.jobs, known) if args.idle_repetitions else [])
    container_workloads, processes = in_process.subjects_of([job.name for job in plan.jobs],
                                                            known)
    one_process = bool(args.container_rounds and container_workloads and processes)
    interleaved = in_process.tool_next_to(args.bench)
    if one_process and not os.access(interleaved, os.X_OK):
        one_process = False
        plan.notes.append(f"the container ops in one process not measured: no "
                          f"{in_process.TOOL} at {interleaved} (build it: cmake --build build "
                          f"--target {in_process.TOOL})")
    if args.list:
        print("\n".join(job.display for job in jobs))
        for repeat in range(args.container_processes if one_process else 0):
            for subjects in processes:
                print(shlex.join(in_process.command(interleaved, container_workloads, subjects,
                                                    args.container_rounds, args.seed + repeat,
                                                    "FILE")))
        return 0

    steps = runner.schedule(jobs, args.repetitions, known, args.seed, args.idle_repetitions,
                            counting=counting)
    guess = args.min_time * 1.5 + 0.2
    progress = Progress(len(steps), guess)
    outcome = runner.run(args.bench, steps, args.min_time, progress,
                         args.heap_counter if counting else "")
    progress.close()

    doc = outcome.doc
    if one_process and not outcome.interrupted:
        print(f"the container ops in one process: {args.container_rounds} rounds, "
              f"{len(processes) * args.container_processes} processes ({in_process.TOOL})",
              file=sys.stderr)
        try:
            doc["context"][in_process.CONTEXT_FIELD] = in_process.run_all(
                interleaved, container_workloads, processes, args.container_rounds, args.seed,
                timeout=max(600.0, 60.0 * args.container_rounds),
                repeats=args.container_processes)
        except in_process.InProcessError as e:
            outcome.failures.append(f"the container ops in one process: {e}")
    notes = plan.notes + [f"failed: {f}" for f in outcome.failures]
    doc["context"].update(
        pmrkit_command=shlex.join(["run.py"] + argv), pmrkit_repetitions=args.repetitions,
        pmrkit_min_time=args.min_time, pmrkit_strategy=args.strategy or "all",
        pmrkit_notes=notes, pmrkit_seed=args.seed, **{analysis.INTERLEAVED_FIELD: True},
        **{results.HEAP_STATE_FIELD: runner.WARM,
           tables.IDLE_REPETITIONS_FIELD: args.idle_repetitions},
        **{results.STRATEGIES_FIELD: list(known)})
    if not doc["benchmarks"]:
        print("run.py: no benchmark produced results", file=sys.stderr)
        return 1
    result_set = results.from_json(doc, known)
    write_reports(args.out, doc, result_set, notes)
    for note in notes:
        print(note, file=sys.stderr)
    print(f"wrote {args.out}/results.json, summary.csv, report.html, charts/", file=sys.stderr)
    if outcome.interrupted:
        return 130
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
