"""The container ops in one process: pmrkit_interleaved run by the main job, and its table.

The main tables run each repetition of a row in a process of its own, so a container row's
time moves with whatever the machine did during that process: on a shared 2-core machine a
few percent between strategies drowns in 20-60% between processes. pmrkit_interleaved
(bench/interleaved.cpp) runs the same ops on several subjects in one process, each once a
round in a new random order, and reports each phase as the median of its per-round ratios to
mimalloc_plain, with the rounds faster and a sign test: the drift of the machine divides out of
each ratio. run.py runs it after the main rows, on the container workloads of the run, once for
each strategy of the run (pooled and fresh beside mimalloc_plain, in a process of their own:
subjects that share a process share its heap, and new_delete's churn of glibc's heap made
size_class's fresh Document 1.9-2.4x slower than beside mimalloc_plain alone; its shared rows,
arenas over a long-lived pool, beside mimalloc_plain in one more), merges what the
processes wrote (run_all) and keeps it in the context of results.json (CONTEXT_FIELD), from
which the tables, the HTML report and --from-json render it, and compare.py holds two runs'
ratios against each other (compare_grids).

Each strategy's process runs several times (DEFAULT_PROCESSES, seeds one apart), because the
rounds of one process share more than the machine's drift: where its heap put the blocks, which
lines its headers and nodes fell on. Two runs of one process each, compared round by round,
called the unchanged new_delete rows' destroys 11% and 16% faster (p < 0.01) in a run where
only size_class's code had changed; so a change between two runs is called only from the
processes' medians (a U test, which needs four processes a side to reach p < 0.05), and a run
of fewer leaves its medians untested.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import tempfile

import metrics as m
import results
import stats
import tables as text_tables

CONTEXT_FIELD = "pmrkit_containers_in_one_process"
TOOL = "pmrkit_interleaved"
DEFAULT_ROUNDS = 41
QUICK_ROUNDS = 11
DEFAULT_PROCESSES = 4  # a strategy's: its rounds pool, its medians are what compare tests
QUICK_PROCESSES = 1
# The checked strategy validates every call and quarantines what is freed (10-300x slower):
# its rounds would take most of the run and say nothing about speed.
LEFT_OUT = ("checked",)
CONTAINER_PREFIX = "Container"
FRESH = "/fresh"
SHARED = "/shared"


class InProcessError(RuntimeError):
    """pmrkit_interleaved could not run or wrote nothing usable."""


def tool_next_to(bench: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(bench)), TOOL)


def subjects_of(names: list[str], known: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """The container workloads (pmrkit_interleaved's names: UnorderedMap, ...) and the subjects
    of each process, in the order the benchmark names of a run hold them: mimalloc_plain, the
    reference, then one strategy spec pooled and /fresh; and, for a strategy with shared rows,
    mimalloc_plain and the spec /shared in a process after it (the long-lived pool under its
    arenas would otherwise share a heap with the fresh subject, whose rows move with what else
    the heap holds). Preload rows and LEFT_OUT strategies are not subjects."""
    workloads: list[str] = []
    strategies: list[str] = []
    shared: set[str] = set()
    for name in names:
        key = results.parse_name(name, known)
        if not key.workload.startswith(CONTAINER_PREFIX) or key.preload:
            continue
        workload = key.workload.split("/", 1)[0][len(CONTAINER_PREFIX):]
        if workload not in workloads:
            workloads.append(workload)
        base = results.strategy_base(key.strategy)
        if (key.strategy == results.RIVAL_STRATEGY or base in LEFT_OUT
                or base == results.REFERENCE_STRATEGY):
            continue
        if key.strategy not in strategies:
            strategies.append(key.strategy)
        if key.variant == SHARED[1:]:
            shared.add(key.strategy)
    processes = []
    for s in strategies:
        processes.append([results.RIVAL_STRATEGY, s, s + FRESH])
        if s in shared:
            processes.append([results.RIVAL_STRATEGY, s + SHARED])
    return workloads, processes


def command(tool: str, workloads: list[str], subjects: list[str], rounds: int, seed: int,
            json_path: str) -> list[str]:
    args = [tool, "--rounds", str(rounds), "--seed", str(seed), "--json", json_path]
    for workload in workloads:
        args += ["--workload", workload]
    return args + subjects


def run(tool: str, workloads: list[str], subjects: list[str], rounds: int, seed: int,
        timeout: float) -> dict:
    """Runs the tool and returns what it wrote; raises InProcessError with the reason."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "in_process.json")
        try:
            done = subprocess.run(command(tool, workloads, subjects, rounds, seed, path),
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InProcessError(f"{TOOL} ran past {timeout:.0f}s") from None
        if done.returncode != 0:
            raise InProcessError(f"{TOOL} exited {done.returncode}: "
                                 f"{done.stderr.strip()[-500:]}")
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise InProcessError(f"{TOOL} wrote no readable results: {e}") from None
    if not doc.get("workloads"):
        raise InProcessError(f"{TOOL} ran no workload")
    return doc


def run_all(tool: str, workloads: list[str], processes: list[list[str]], rounds: int, seed: int,
            timeout: float, repeats: int = 1) -> dict:
    """Runs the tool `repeats` times (seeds seed, seed + 1, ...) for each list of subjects and
    merges what they wrote: the first process's header and reference, then every other subject,
    each with the reference's median seconds of its first process (reference_median_seconds),
    its median ratios process by process (process_median_ratios), and its rounds pooled over
    its processes (ratios, and the median, rounds faster and slower and sign test over them)."""
    merged: dict | None = None
    for repeat in range(repeats):
        for subjects in processes:
            doc = run(tool, workloads, subjects, rounds, seed + repeat, timeout)
            if merged is None:
                merged = {k: v for k, v in doc.items() if k != "workloads"}
                merged["processes"] = 0
                merged["processes_per_strategy"] = repeats
                merged["rounds_per_process"] = doc.get("rounds", rounds)
                merged["workloads"] = [{"name": w["name"], "subjects": w["subjects"][:1]}
                                       for w in doc["workloads"]]
            merged["processes"] += 1
            by_name = {w["name"]: w for w in merged["workloads"]}
            for workload in doc["workloads"]:
                reference, *others = workload["subjects"]
                kept = by_name[workload["name"]]["subjects"]
                earlier = {s["name"]: s for s in kept}
                for subject in others:
                    if subject["name"] in earlier:
                        _pool(earlier[subject["name"]], subject)
                        continue
                    subject["reference_median_seconds"] = reference["median_seconds"]
                    subject["process_median_ratios"] = [subject["median_ratio"]]
                    kept.append(subject)
    if merged is None:
        raise InProcessError("no subjects to run")
    merged["rounds"] = merged["rounds_per_process"] * repeats
    return merged


def _pool(subject: dict, more: dict) -> None:
    """Adds another process's results of the same subject to `subject`."""
    subject["process_median_ratios"].append(more["median_ratio"])
    if "ratios" not in subject or "ratios" not in more:
        subject.pop("ratios", None)
        return
    subject["ratios"] = [a + b for a, b in zip(subject["ratios"], more["ratios"])]
    subject["median_ratio"] = [statistics.median(r) for r in subject["ratios"]]
    subject["faster"] = [sum(x < 1 for x in r) for r in subject["ratios"]]
    subject["slower"] = [sum(x > 1 for x in r) for r in subject["ratios"]]
    subject["p"] = [stats.sign_test_p(f, s) for f, s in zip(subject["faster"], subject["slower"])]


CSV_NAME = "containers_in_one_process.csv"
CSV_COLUMNS = ["workload", "strategy", "variant", "phase", "rounds", "processes",
               "ratio_to_reference", "rounds_faster", "rounds_slower", "sign_test_p",
               "median_seconds", "reference_median_seconds", "reference"]


def write_csv(path: str, doc: dict) -> None:
    """One row per workload, subject and phase: the rounds and the processes a strategy they
    pool, the subject's median ratio to the reference, its rounds faster and slower, the sign
    test's p, its median seconds and the reference's in the same (first) process; the
    reference's own rows leave the ratio columns empty."""
    reference = doc.get("reference", results.RIVAL_STRATEGY)
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(CSV_COLUMNS)
        for workload in doc.get("workloads", []):
            subjects = workload["subjects"]
            for subject in subjects:
                strategy, variant = _row_name(subject["name"]).rsplit("/", 1)
                own_reference = subject.get("reference_median_seconds",
                                            subjects[0]["median_seconds"])
                for p, phase in enumerate(doc.get("phases", [])):
                    tested = "median_ratio" in subject
                    out.writerow([
                        CONTAINER_PREFIX + workload["name"], strategy, variant, phase,
                        doc.get("rounds", ""), doc.get("processes_per_strategy", 1),
                        f"{subject['median_ratio'][p]:.6g}" if tested else "",
                        subject["faster"][p] if tested else "",
                        subject["slower"][p] if tested else "",
                        f"{subject['p'][p]:.6g}" if tested else "",
                        f"{subject['median_seconds'][p]:.9g}",
                        f"{own_reference[p]:.9g}", reference])


def _row_name(subject: str) -> str:
    # The main tables' strategy/variant: a subject without /fresh or /shared is one resource
    # reused.
    return subject if subject.endswith((FRESH, SHARED)) else subject + "/pooled"


def grids(doc: dict) -> list[tuple[str, str, text_tables.Grid]]:
    """(title, caption, grid) per workload: the reference's median time per phase in its row,
    then each subject's median ratio to it, (rounds faster / rounds) and p."""
    phases = doc.get("phases", [])
    rounds = doc.get("rounds", 0)
    reference = doc.get("reference", results.RIVAL_STRATEGY)
    processes = doc.get("processes", 1)
    per_strategy = doc.get("processes_per_strategy", 1)
    seed = doc.get("seed")
    seeds = (f"seed {seed}" if per_strategy == 1 or not isinstance(seed, int)
             else f"seeds {seed}–{seed + per_strategy - 1}")
    pooled = (f" in {per_strategy} processes of {doc.get('rounds_per_process')} a strategy"
              if per_strategy > 1 else "")
    where = (f"each strategy in processes of its own with {reference}, {processes} processes"
             if processes > 1 else "one process")
    by_process = (" over the rounds, [processes whose median is below 1 / processes]"
                  if per_strategy > 1 else "")
    caption = (f"{rounds} rounds{pooled} ({TOOL}, {seeds}"
               f"{', each op right after an untimed one of its own' if doc.get('warm') else ''}"
               f"; {where}), every subject once a round in a new random order; first row: "
               f"{reference}'s median time{' in the first' if processes > 1 else ''}; below: "
               f"time over {reference}'s in the same round, median of the rounds (rounds "
               f"faster / rounds), two-sided sign test p{by_process}")
    out = []
    for workload in doc.get("workloads", []):
        rows, roles = [], []
        for subject in workload["subjects"]:
            if "median_ratio" not in subject:
                cells = [m.format_time(s * 1e9) for s in subject["median_seconds"]]
                roles.append("reference")
            else:
                cells = [f"{r:.3f} ({f}/{rounds}) p={p:.3f}" for r, f, p in
                         zip(subject["median_ratio"], subject["faster"], subject["p"])]
                medians = subject.get("process_median_ratios", [])
                if len(medians) > 1:
                    cells = [f"{cell} [{sum(m[phase] < 1 for m in medians)}/{len(medians)}]"
                             for phase, cell in enumerate(cells)]
                roles.append("row")
            rows.append([_row_name(subject["name"])] + cells)
        title = f"{CONTAINER_PREFIX}{workload['name']} in one process"
        out.append((title, caption, text_tables.Grid(
            headers=["strategy/variant"] + list(phases), rows=rows,
            numeric=[False] + [True] * len(phases), better=[0] * (1 + len(phases)),
            roles=roles)))
    return out


def render(doc: dict | None) -> str:
    """The text tables ("" without results)."""
    if not doc:
        return ""
    parts = []
    for title, caption, grid in grids(doc):
        parts.append(f"{title} — {caption}\n{text_tables.render(grid, '  ')}")
    return "\n\n".join(parts) + "\n" if parts else ""


def _subjects_by_name(workload: dict) -> dict[str, dict]:
    return {s["name"]: s for s in workload.get("subjects", []) if "median_ratio" in s}


def _compare_cell(old: dict | None, new: dict | None, phase: int) -> str:
    """OLD's median ratio -> NEW's, and whether the processes' median ratios differ (U test);
    untested with fewer than stats.MIN_SAMPLES processes a side."""
    if old is None or new is None:
        side = old or new
        value = f"{side['median_ratio'][phase]:.3f}"
        return f"— → {value}" if old is None else f"{value} → —"
    before, after = old["median_ratio"][phase], new["median_ratio"][phase]
    cell = f"{before:.3f} → {after:.3f}"
    old_processes, new_processes = _process_medians(old, phase), _process_medians(new, phase)
    p = stats.u_test(old_processes, new_processes)
    if p is None:
        return f"{cell} untested ({len(old_processes)}+{len(new_processes)} processes)"
    change = stats.relative_change(before, after)
    if p < stats.ALPHA and change is not None:
        return f"{cell} {change:+.1%} (p={p:.3f})"
    return f"{cell} ~ (p={p:.3f})"


def _process_medians(subject: dict, phase: int) -> list[float]:
    # A file from before processes were repeated holds one process: its median.
    return [m[phase] for m in subject.get("process_median_ratios", [subject["median_ratio"]])]


def compare_grids(old: dict | None, new: dict | None,
                  workloads=()) -> list[tuple[str, str, text_tables.Grid]]:
    """(title, caption, grid) per container workload in either run: each subject's median
    ratio to the reference in OLD and in NEW per phase, and whether NEW's differ from OLD's (a
    two-sided Mann-Whitney U test over the processes' median ratios, not the rounds, which
    share their process: the change of the median ratio where p < 0.05, else ~; untested with
    fewer than three processes a side). `workloads` (names as the main tables', e.g.
    ContainerMap; case aside) narrows them."""
    wanted = {w.lower().split("/", 1)[0] for w in workloads}
    if not old or not new:
        return []
    old_workloads = {w["name"]: w for w in old.get("workloads", [])}
    new_workloads = {w["name"]: w for w in new.get("workloads", [])}
    # A workload one run lacks keeps its table, the other side "—", as a missing subject does:
    # a table that vanished would read as no change.
    workload_names = list(new_workloads) + [n for n in old_workloads if n not in new_workloads]
    phases = new.get("phases", [])
    reference = new.get("reference", results.RIVAL_STRATEGY)
    caption = (f"time over {reference}'s in the same round, median of the rounds, OLD "
               f"({old.get('rounds')} rounds, {old.get('processes_per_strategy', 1)} processes "
               f"a strategy) → NEW ({new.get('rounds')} rounds, "
               f"{new.get('processes_per_strategy', 1)} processes); a change of the median ratio "
               "where the processes' medians differ (two-sided U test over the processes, "
               "p < 0.05, which takes four a side), else ~; untested below three a side")
    out = []
    for name in workload_names:
        title = f"{CONTAINER_PREFIX}{name} in one process"
        if wanted and f"{CONTAINER_PREFIX}{name}".lower() not in wanted:
            continue
        before = _subjects_by_name(old_workloads.get(name, {}))
        after = _subjects_by_name(new_workloads.get(name, {}))
        names = list(after) + [n for n in before if n not in after]
        rows = [[_row_name(n)] + [_compare_cell(before.get(n), after.get(n), p)
                                  for p in range(len(phases))] for n in names]
        out.append((title, caption, text_tables.Grid(
            headers=["strategy/variant"] + list(phases), rows=rows,
            numeric=[False] + [True] * len(phases), better=[0] * (1 + len(phases)),
            roles=["row"] * len(rows))))
    return out


def render_compare(old: dict | None, new: dict | None, workloads=()) -> str:
    """The text of compare_grids ("" unless both runs hold the container ops in one process)."""
    parts = [f"{title} — {caption}\n{text_tables.render(grid, '  ')}"
             for title, caption, grid in compare_grids(old, new, workloads)]
    return "\n\n".join(parts) + "\n" if parts else ""
