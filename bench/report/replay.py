#!/usr/bin/python3
"""Replay a recorded allocation trace under every strategy, report like the main job, recommend.

    bench/report/replay.py TRACE --replay build/trace/pmrkit-replay --out out/replay [options]

TRACE is a pmrkit trace (pmrkit-record, recording_resource) or a heaptrack file (x.zst from
`heaptrack -o x`). Rows: every strategy pmrkit-replay lists for the trace (or --strategy, plus
the new_delete baseline), the malloc strategy again under each preloaded process allocator
(jemalloc, tcmalloc, mimalloc; runner.PRELOADS), the `limit` row (the replayer alone, on a
resource that does no work) and, with --sweep, a grid of size_class options. Each repetition of
each row runs in a process of its own (`pmrkit-replay TRACE --strategy SPEC --json`), in rounds
shuffled anew each round (runner.schedule). Prints the tables and writes OUT/results.json,
summary.csv, report.html and charts/ with the main job's modules, then a recommendation:
the fastest, the leanest and the best trade-off, each as a spec for PMRKIT_STRATEGY.
See docs/replay.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shlex
import subprocess
import sys
from collections.abc import Iterable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import analysis  # noqa: E402
import metrics as m  # noqa: E402
import results  # noqa: E402
import run as main_job  # noqa: E402
import runner  # noqa: E402
from progress import Progress  # noqa: E402

DEFAULT_REPETITIONS = 5
QUICK_REPETITIONS = 3
LIMIT_ROW = "limit"
TUNED_STRATEGY = "size_class"
# --sweep: the size_class options one at a time around their defaults (max_pooled 64K,
# chunk_size 64K, thread_cache 2M, max_retained 16M), then a lean and a fast combination.
SWEEP_OPTIONS = (
    "max_pooled=4K", "max_pooled=256K", "chunk_size=16K", "chunk_size=1M", "thread_cache=0",
    "thread_cache=256K", "max_retained=0", "max_retained=64M",
    "chunk_size=16K,max_retained=0,thread_cache=256K",
    "max_pooled=256K,chunk_size=1M,max_retained=64M",
)
RECOMMEND_PREFIX = "recommended"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="replay.py", description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a pmrkit trace or a heaptrack file (x.zst)")
    p.add_argument("--replay", default="build/trace/pmrkit-replay", help="the pmrkit-replay binary")
    p.add_argument("--out", default="out/replay",
                   help="directory for results.json, summary.csv, report.html and charts/")
    p.add_argument("--strategy", action="append", default=[], metavar="SPEC",
                   help="only this strategy (repeatable), plus the new_delete baseline, the "
                   "limit row and the preload rows")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK_REPETITIONS} repetitions: a smoke run, too few to call a "
                   "time difference")
    p.add_argument("--sweep", action="store_true",
                   help=f"also {len(SWEEP_OPTIONS)} {TUNED_STRATEGY} option sets, so the "
                   "recommendation is tuned to the trace")
    p.add_argument("--repetitions", type=int, metavar="N",
                   help=f"replays per row, each in a process of its own, interleaved with the "
                   f"other rows (default {DEFAULT_REPETITIONS}, --quick {QUICK_REPETITIONS})")
    p.add_argument("--no-preload", action="store_true",
                   help="skip the rows with the process allocator replaced via LD_PRELOAD")
    p.add_argument("--preload", action="append", default=[], metavar="NAME",
                   choices=[tag for tag, _, _ in runner.PRELOADS],
                   help="only this process allocator for the preload rows (repeatable)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the interleaving order")
    p.add_argument("--list", action="store_true", help="print the rows, and stop")
    args = p.parse_args(argv)
    if args.repetitions is None:
        args.repetitions = QUICK_REPETITIONS if args.quick else DEFAULT_REPETITIONS
    if args.repetitions < 1:
        p.error("--repetitions must be at least 1")
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    args.preloads = ([] if args.no_preload
                     else args.preload or [tag for tag, _, _ in runner.PRELOADS])
    return args


class ReplayError(RuntimeError):
    """pmrkit-replay could not be run or refused the trace; the message says why."""


def listed_strategies(replay: str, trace: str) -> list[str]:
    """The strategies pmrkit-replay would run for this trace (the thread-safe ones for a
    multi-threaded trace), in the registry's order."""
    try:
        done = subprocess.run([replay, trace, "--list-strategies"], capture_output=True,
                              text=True, timeout=300, env=runner.child_env())
    except FileNotFoundError:
        raise ReplayError(f"{replay}: no such binary; build it with "
                          "`cmake --build build --target pmrkit-replay`") from None
    except PermissionError:
        raise ReplayError(f"{replay}: not executable") from None
    except subprocess.TimeoutExpired:
        raise ReplayError(f"{replay} {trace} --list-strategies: no answer in 300 s "
                          "(is the trace readable?)") from None
    if done.returncode != 0:
        raise ReplayError(done.stderr.strip() or f"{replay} --list-strategies failed "
                          f"(exit {done.returncode})")
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def sweep_specs() -> list[str]:
    return [f"{TUNED_STRATEGY}:{options}" for options in SWEEP_OPTIONS]


def plan(listed: list[str], chosen: list[str], sweep: bool,
         preloads: list[str]) -> tuple[list[runner.Job], list[str]]:
    """The rows to run (as runner.Jobs named Replay/<spec>, one table) and notes on what was
    left out."""
    notes = []
    specs = list(chosen) if chosen else list(listed)
    if results.BASELINE_STRATEGY not in specs and results.BASELINE_STRATEGY in listed:
        specs.insert(0, results.BASELINE_STRATEGY)
    if sweep:
        if TUNED_STRATEGY in listed:
            specs += [s for s in sweep_specs() if s not in specs]
        else:
            notes.append(f"--sweep skipped: {TUNED_STRATEGY} is not offered for this trace")
    jobs = [runner.Job(f"Replay/{spec}", (spec,)) for spec in [LIMIT_ROW] + specs]
    on = runner.preload_strategy(tuple(listed))
    for tag, path, package in runner.PRELOADS:
        if tag not in preloads:
            continue
        if not os.path.exists(path):
            notes.append(f"preload {tag} skipped: {path} is missing (apt-get install {package})")
            continue
        jobs.append(runner.Job(f"Replay/{on}", (on,), tag, path))
    return jobs, notes


def run_one(replay: str, trace: str, step: runner.Step,
            out_path: str) -> tuple[dict | None, str | None]:
    """One replay of one row in a process of its own; its JSON document, or what went wrong."""
    job = step.job
    spec = job.args[0]
    command = [replay, trace, "--strategy", spec, "--repetitions", "1", "--json", out_path]
    if spec != LIMIT_ROW:
        command.append("--no-limit")
    if os.path.exists(out_path):
        os.unlink(out_path)
    try:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=3600,
                              env=runner.child_env(job.preload_path))
    except subprocess.TimeoutExpired:
        return None, f"{job.display}: no result within an hour"
    try:
        with open(out_path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError):
        doc = None
    if done.returncode != 0 or not doc or not doc.get("benchmarks"):
        why = (done.stderr or "").strip().splitlines()[-2:]
        return None, f"{job.display}: exit {done.returncode}" + (
            ": " + " | ".join(why) if why else "")
    if job.preload:
        results.tag_preload(doc, job.preload)
    return doc, None


# ---------------------------------------------------------------------------------------------
# The recommendation


@dataclasses.dataclass
class Recommendation:
    fastest: analysis.AnalyzedRow | None
    leanest: analysis.AnalyzedRow | None
    trade_off: analysis.AnalyzedRow | None
    front: list[analysis.AnalyzedRow]  # the Pareto front of time against peak held, leanest first
    scores: dict[str, float]           # trade-off score per front row's label


def trade_off_score(time: float, held: float, best_time: float, best_held: float) -> float:
    """time x held, each over the best of the candidates: 1.0 is a row both fastest and leanest;
    2.0 is twice as slow at the least memory, or the fastest at twice the memory."""
    return (time / best_time) * (held / max(best_held, 1.0))


def recommend(table: analysis.Table, left_out: Iterable[str] = ()) -> Recommendation:
    """The rows a user can paste as PMRKIT_STRATEGY (strategies, not the debugging ones, not the
    preload or limit rows, not the strategies `left_out` names): the fastest and the leanest by
    median (ties broken by the other figure), and the trade-off: on the Pareto front of time
    against peak held, the row with the lowest trade_off_score (ties: the faster)."""
    left_out = set(left_out)
    candidates = [r for r in analysis.verdict_rows(table)
                  if r.median("ns_per_op") is not None
                  and r.key.strategy.split(":")[0] not in left_out]
    if not candidates:
        return Recommendation(None, None, None, [], {})

    def held(r):
        return r.median("peak_held_bytes")
    fastest = min(candidates, key=lambda r: (r.median("ns_per_op"),
                                             held(r) if held(r) is not None else float("inf")))
    measured = [r for r in candidates if held(r) is not None]
    if not measured:
        return Recommendation(fastest, None, None, [], {})
    leanest = min(measured, key=lambda r: (held(r), r.median("ns_per_op")))
    front = sorted(analysis.pareto_front(measured), key=lambda r: (held(r), r.median("ns_per_op")))
    best_time = min(r.median("ns_per_op") for r in measured)
    best_held = min(held(r) for r in measured)
    scores = {r.label: trade_off_score(r.median("ns_per_op"), held(r), best_time, best_held)
              for r in front}
    trade_off = min(front, key=lambda r: (scores[r.label], r.median("ns_per_op")))
    return Recommendation(fastest, leanest, trade_off, front, scores)


def _figures(row: analysis.AnalyzedRow) -> str:
    held = row.median("peak_held_bytes")
    ratio = row.median("held_over_live")
    return (m.format_time(row.median("ns_per_op")) + "/op"
            + ("" if held is None else f", {m.format_bytes(held)} peak held")
            + ("" if ratio is None else f" ({m.format_times(ratio)} live)"))


def recommendation_lines(rec: Recommendation, one_thread: Iterable[str] = ()) -> list[str]:
    """The closing verdict: the time-against-memory front, then three specs to paste, and a
    note for those of them `one_thread` names (strategies install_default_from_env() takes only
    for a program that allocates from one thread: the trace's context lists them)."""
    if rec.fastest is None:
        return ["no recommendation: no strategy row has results"]
    lines = []
    if rec.front:
        lines.append("time against peak held, the front (no other strategy is both faster and "
                     "leaner), leanest first:")
        lines += [f"  {r.key.strategy:<50} {_figures(r)}, score {rec.scores[r.label]:.2f}"
                  for r in rec.front]
    lines.append(f"{RECOMMEND_PREFIX} fastest:   PMRKIT_STRATEGY='{rec.fastest.key.strategy}'"
                 f"   ({_figures(rec.fastest)})")
    if rec.leanest:
        lines.append(f"{RECOMMEND_PREFIX} leanest:   PMRKIT_STRATEGY='{rec.leanest.key.strategy}'"
                     f"   ({_figures(rec.leanest)})")
    if rec.trade_off:
        lines.append(f"{RECOMMEND_PREFIX} trade-off: PMRKIT_STRATEGY='{rec.trade_off.key.strategy}'"
                     f"   ({_figures(rec.trade_off)})")
        lines.append("  (the trade-off: of the front, the lowest time/op over the fastest's "
                     "with a peak held figure times peak held over the leanest's; medians; "
                     "'checked', preload and limit rows are not candidates)")
    named = [r.key.strategy.split(":")[0] for r in (rec.fastest, rec.leanest, rec.trade_off) if r]
    one_thread = set(one_thread)
    single = [name for name in dict.fromkeys(named) if name in one_thread]
    if single:
        lines.append(f"  ({', '.join(single)}: only for a program that allocates from one "
                     "thread; install with pmrkit::install_default_from_env("
                     "pmrkit::default_resource_users::one_thread), as the plain call refuses it)")
    return lines


def main(argv: list[str]) -> int:
    sys.stdout.reconfigure(errors="replace")
    args = parse_args(argv)
    try:
        listed = listed_strategies(args.replay, args.trace)
    except ReplayError as e:
        print(f"replay.py: {e}", file=sys.stderr)
        return 2
    jobs, notes = plan(listed, args.strategy, args.sweep, args.preloads)
    for note in notes:
        print(note, file=sys.stderr)
    if args.list:
        print("\n".join(job.display for job in jobs))
        return 0
    known = tuple(listed)
    steps = runner.schedule(jobs, args.repetitions, known, args.seed)
    progress = Progress(len(steps), 2.0)
    outcome = runner.run(args.replay, steps, 0, progress,
                         run_step=lambda step, out: run_one(args.replay, args.trace, step, out))
    progress.close()
    doc, failures, interrupted = outcome.doc, outcome.failures, outcome.interrupted
    notes += [f"failed: {f}" for f in failures]
    if not doc["benchmarks"]:
        print("replay.py: no row produced results", file=sys.stderr)
        for note in notes:
            print(note, file=sys.stderr)
        return 1
    doc["context"].update(
        pmrkit_command=shlex.join(["replay.py"] + argv), pmrkit_repetitions=args.repetitions,
        pmrkit_notes=notes, pmrkit_seed=args.seed, **{analysis.INTERLEAVED_FIELD: True},
        **{results.STRATEGIES_FIELD: list(known)})
    result_set = results.from_json(doc, known)
    ctx = doc["context"]
    print(f"{args.trace}: {ctx.get('pmrkit_trace_format')}, {ctx.get('pmrkit_trace_operations')} "
          f"operations on {ctx.get('pmrkit_trace_threads')} threads, "
          f"{ctx.get('pmrkit_trace_cross_thread_frees')} cross-thread frees, peak live "
          f"{m.format_bytes(float(ctx.get('pmrkit_trace_peak_live_bytes', 0)))}\n")
    analyzed = analysis.analyze_run(result_set)
    # Strategies that serve one thread only: a program whose trace shows several threads (even
    # taking turns, as those the replay ran them for) cannot install one as its default.
    one_thread = ctx.get("pmrkit_one_thread_strategies", [])
    threads = int(ctx.get("pmrkit_trace_threads", 1) or 1)
    left_out = one_thread if threads > 1 else []
    lines = recommendation_lines(recommend(analyzed[0], left_out),
                                 one_thread if threads <= 1 else ())
    if left_out:
        lines.append(f"  (not candidates: {', '.join(left_out)}: they serve one thread, and the "
                     f"program ran {threads} threads, which its default resource must all serve)")
    main_job.write_reports(args.out, doc, result_set, notes + lines,
                           title=f"pmrkit replay of {os.path.basename(args.trace)}")
    print("\n" + "\n".join(lines))
    with open(os.path.join(args.out, "tables.txt"), "a", encoding="utf-8") as f:
        f.write("\n" + "\n".join(lines) + "\n")
    for note in notes:
        print(note, file=sys.stderr)
    print(f"wrote {args.out}/results.json, summary.csv, report.html, charts/", file=sys.stderr)
    if interrupted:
        return 130
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
