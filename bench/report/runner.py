"""Running pmrkit_bench: which benchmarks to run, one process per repetition, merged JSON.

Each repetition of a benchmark runs in a process of its own (an anchored --benchmark_filter,
--benchmark_repetitions=1): one strategy's heap state stays out of the next one's timings, a
row's peak held memory can be read from its own process (resident-set high-water mark,
mallinfo2), and a crash costs one row instead of the whole run. The repetitions of the rows of
one table are interleaved: round after round, each round runs every row of the table once, in
an order shuffled anew for each round, so that a burst of load on a shared machine lands on
some repetition of many rows instead of on every repetition of one (see schedule()).

Allocations are counted in one more process per row, with libpmrkit_heap_counter.so preloaded
(in front of the row's own preloaded allocator, if any): an interposer costs its forwarding call
even when it counts nothing, so the processes that are timed run without it, and the counting
process's allocs_per_op and bytes_per_op are copied into the row's timed results (run()), where
the report reads them as the one measurement they are (results.COUNTED), never as samples.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import tempfile

import results
from progress import Progress

# Whole-process allocators for the preload rows: (tag, library, Debian package).
PRELOADS = (
    ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
     "libgoogle-perftools4"),
    ("mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", "libmimalloc2.0"),
)


# The heap state of each benchmark process (bench/heap_state.hpp): the tables and verdicts are
# the warm runs; the idle runs are the figure beside them.
HEAP_ENV = "PMRKIT_BENCH_HEAP"
WARM = "warm"
IDLE = "idle"

# The heap counter, built next to pmrkit_bench (bench/CMakeLists.txt), and how long its process
# runs: its counting pass counts an eighth of the iterations Google Benchmark settles on (at
# least four) after one uncounted op, so a pooled row's start-up is not spread over them.
HEAP_COUNTER = "libpmrkit_heap_counter.so"
COUNTING_MIN_TIME = 0.01
COUNTED = results.COUNTED


def preloadable(path: str) -> bool:
    """Whether a library at `path` can go into LD_PRELOAD: the dynamic loader splits that list
    at spaces and colons, with no way to escape either."""
    return not any(c in path for c in " :")


def heap_counter_next_to(bench: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(bench)), HEAP_COUNTER)


def job_timeout_s(repetitions: int, min_time: float) -> float:
    """How long one benchmark process may take before it counts as hung: generous, since an op
    can be slow and Google Benchmark first searches for an iteration count."""
    return 120 + 20 * repetitions * min_time


def preload_strategy(known: tuple[str, ...]) -> str:
    """The strategy the preload rows run: malloc, the path a preloaded allocator is built for;
    new_delete with a binary that predates the malloc strategy."""
    return (results.PRELOAD_STRATEGY if results.PRELOAD_STRATEGY in known
            else results.BASELINE_STRATEGY)


class BenchError(RuntimeError):
    """pmrkit_bench could not be run or refused the request; the message says why."""


@dataclasses.dataclass(frozen=True)
class Job:
    name: str               # the benchmark, as --benchmark_list_tests printed it
    args: tuple[str, ...]   # extra flags, e.g. ("--strategy=new_delete",)
    preload: str = ""       # tag of the replaced process allocator, "" for none
    preload_path: str = ""
    heap: str = WARM        # the process's heap state

    @property
    def display(self) -> str:
        return (self.name + (f" [preload={self.preload}]" if self.preload else "")
                + (f" [heap={self.heap}]" if self.heap != WARM else ""))


def child_env(preload_path: str = "", heap: str = WARM) -> dict:
    """The environment of a benchmark process; preload_path is LD_PRELOAD's value ("" for none)."""
    env = dict(os.environ)
    env[HEAP_ENV] = heap
    # The strategy is always passed as a flag; an inherited PMRKIT_STRATEGY must not leak
    # into the baseline or preload runs.
    env.pop("PMRKIT_STRATEGY", None)
    if preload_path:
        env["LD_PRELOAD"] = preload_path
    else:
        env.pop("LD_PRELOAD", None)
    return env


def _call(bench: str, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([bench] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout,
                              env=child_env(heap=IDLE))  # listing needs no background set
    except FileNotFoundError:
        raise BenchError(f"{bench}: no such benchmark binary; build it with "
                         "`cmake --build build --target pmrkit_bench`") from None
    except PermissionError:
        raise BenchError(f"{bench}: not executable") from None


def list_benchmarks(bench: str, strategy: str = "") -> list[str]:
    args = ["--benchmark_list_tests=true"] + ([f"--strategy={strategy}"] if strategy else [])
    done = _call(bench, args)
    if done.returncode != 0:
        raise BenchError(f"{bench} {' '.join(args)} failed (exit {done.returncode}):\n"
                         f"{done.stderr.strip()}")
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def list_strategies(bench: str) -> list[dict]:
    """The binary's registry (--pmrkit_list_strategies=json): one dict per strategy, with name,
    summary, thread_safe, uses_upstream, reuses_memory, bound_to_thread and options (see
    bench_support.hpp)."""
    args = ["--pmrkit_list_strategies=json"]
    try:
        done = _call(bench, args, timeout=30)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{bench} {args[0]} did not answer within 30s") from None
    if done.returncode != 0:
        raise BenchError(f"{bench} {args[0]} failed (exit {done.returncode}):\n"
                         f"{done.stderr.strip()}")
    try:
        listed = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise BenchError(f"{bench} {args[0]} printed no JSON ({e}); is it pmrkit_bench?") from None
    if not isinstance(listed, list) or not all(isinstance(s, dict) and "name" in s
                                               for s in listed):
        raise BenchError(f"{bench} {args[0]}: expected a list of strategies with names")
    return listed


def strategy_names(bench: str) -> tuple[str, ...]:
    """The names of the strategies the binary offers, in its order."""
    return tuple(s["name"] for s in list_strategies(bench))


def _workload_matches(key: results.RowKey, workloads: list[str]) -> bool:
    if not workloads:
        return True
    group = key.workload.split("/", 1)[0].lower()
    return any(w.lower() in (key.workload.lower(), group) for w in workloads)


@dataclasses.dataclass
class Plan:
    jobs: list[Job]
    notes: list[str]  # what was left out and why (missing preload libraries, ...)


def plan(bench: str, known: tuple[str, ...], strategy: str = "", workloads=(),
         preloads=tuple(tag for tag, _, _ in PRELOADS), preload_patterns: bool = True) -> Plan:
    """Every benchmark to run, in the binary's order, then the preload rows (for each tag of
    `preloads`: the malloc strategy's fresh workloads and, with preload_patterns, its Alloc*
    rows), grouped by table. A narrowed run (`strategy`) keeps the baseline and reference rows,
    and with preloads the plain malloc rows the preload rows replace the allocator of."""
    notes = []
    jobs: list[Job] = []
    seen: set[results.RowKey] = set()

    def add(names: list[str], args: tuple[str, ...], keep) -> None:
        for name in names:
            key = results.parse_name(name, known)
            if key not in seen and _workload_matches(key, workloads) and keep(key):
                seen.add(key)
                jobs.append(Job(name, args))

    if strategy:
        add(list_benchmarks(bench, strategy), (f"--strategy={strategy}",), lambda k: True)
    else:
        add(list_benchmarks(bench), (), lambda k: True)
    baseline_names: list[str] | None = None
    if strategy and results.strategy_base(strategy) != results.BASELINE_STRATEGY:
        # A narrowed run still needs the baseline and the reference rows to compare with.
        baseline_names = list_benchmarks(bench, results.BASELINE_STRATEGY)
        add(baseline_names, (f"--strategy={results.BASELINE_STRATEGY}",),
            lambda k: k.is_reference or (k.strategy == results.BASELINE_STRATEGY
                                         and k.variant in ("", results.BASELINE_VARIANT)))
    if not jobs:
        raise BenchError("no benchmark matches "
                         + (f"--workload {' '.join(workloads)}" if workloads else "the request")
                         + f"; workloads available: {', '.join(available_workloads(bench, known))}")
    if preloads:
        on = preload_strategy(known)
        if on != results.PRELOAD_STRATEGY:
            notes.append(f"{bench} has no {results.PRELOAD_STRATEGY} strategy: the preload rows "
                         f"run {on}, through the aligned operator new path")
        eligible = []
        for name in list_benchmarks(bench, on):
            key = results.parse_name(name, known)
            if (key.strategy == on and _workload_matches(key, workloads)
                    and (key.variant == results.BASELINE_VARIANT
                         or (preload_patterns and key.is_pattern))):
                eligible.append(name)
        if strategy and results.strategy_base(strategy) != on:
            add(eligible, (f"--strategy={on}",), lambda k: True)
        for tag, path, package in PRELOADS:
            if tag not in preloads:
                continue
            if not os.path.exists(path):
                notes.append(f"preload {tag} skipped: {path} is missing "
                             f"(apt-get install {package})")
                continue
            jobs += [Job(name, (f"--strategy={on}",), tag, path) for name in eligible]
    return Plan(_by_table(jobs, known), notes)


def _by_table(jobs: list[Job], known) -> list[Job]:
    """Runs the rows of one table one after the other (baseline, strategies, reference, then
    its preload rows): a shared machine's load drifts, and rows compared with each other
    should see the same drift."""
    first: dict[tuple[str, int], int] = {}
    for job in jobs:
        first.setdefault(results.parse_name(job.name, known).table, len(first))
    return sorted(jobs, key=lambda job: first[results.parse_name(job.name, known).table])


def idle_jobs(jobs: list[Job], known) -> list[Job]:
    """The same rows in an idle process, for those whose time moves with the heap's state: the
    fresh rows (a new buffer per op, which glibc may hand back to the kernel each time) and the
    allocator patterns, not the preload rows (another allocator's policy), the references or
    the threaded container rows (each thread's heap is its own state: their figure is the
    machine's throughput, not one op on a heap in a known state)."""
    out = []
    for job in jobs:
        key = results.parse_name(job.name, known)
        threaded_container = key.threads > 1 and not key.is_pattern
        if not job.preload and not key.is_reference and not threaded_container and (
                key.variant == results.BASELINE_VARIANT or key.is_pattern):
            out.append(dataclasses.replace(job, heap=IDLE))
    return out


@dataclasses.dataclass(frozen=True)
class Step:
    """One process to start: one repetition (round) of one job, or its counting run."""
    job: Job
    round: int   # 0-based
    rounds: int
    counting: bool = False  # with the heap counter preloaded, for allocs/op and B/op only

    @property
    def display(self) -> str:
        if self.counting:
            return f"{self.job.display} (counting allocations)"
        return f"{self.job.display} (run {self.round + 1}/{self.rounds})"


def schedule(jobs: list[Job], repetitions: int, known, seed: int,
             idle_repetitions: int = 0, counting: bool = False) -> list[Step]:
    """The order to run the plan in: table by table (as plan() grouped them); within a table,
    with `counting` first one counting step per warm row, then rounds, each of which runs every
    row of the table once, in an order shuffled anew per round (random.Random(seed), so a run's
    order can be replayed). Warm jobs run `repetitions` rounds, idle ones (idle_jobs())
    `idle_repetitions`, in the same rounds as the warm ones."""
    rng = random.Random(seed)
    tables: dict[tuple[str, int], list[Job]] = {}
    for job in jobs:
        tables.setdefault(results.parse_name(job.name, known).table, []).append(job)

    def rounds_of(job: Job) -> int:
        return idle_repetitions if job.heap == IDLE else repetitions
    steps = []
    for rows in tables.values():
        if counting:
            steps += [Step(job, 0, 1, counting=True) for job in rows if job.heap != IDLE]
        for round_index in range(max(rounds_of(job) for job in rows)):
            order = [job for job in rows if round_index < rounds_of(job)]
            rng.shuffle(order)
            steps += [Step(job, round_index, rounds_of(job)) for job in order]
    return steps


def available_workloads(bench: str, known) -> list[str]:
    seen: dict[str, None] = {}
    for name in list_benchmarks(bench):
        seen.setdefault(results.parse_name(name, known).workload.split("/", 1)[0], None)
    return list(seen)


def ere_escape(text: str) -> str:
    """Escapes a benchmark name for Google Benchmark's filter (a POSIX extended regex)."""
    return "".join("\\" + c if c in ".[]{}()\\*+?^$|" else c for c in text)


@dataclasses.dataclass
class Outcome:
    doc: dict               # merged Google Benchmark JSON
    failures: list[str]     # one line per benchmark that did not produce results
    interrupted: bool


def run_one(bench: str, job: Job, repetitions: int, min_time: float,
            out_path: str, heap_counter: str = "") -> tuple[dict | None, str | None]:
    """Runs one benchmark; returns its JSON document, and what went wrong if anything did.
    With heap_counter, the process runs with it preloaded in front of the job's allocator, so
    that its RTLD_NEXT finds that allocator."""
    args = [f"--benchmark_filter=^{ere_escape(job.name)}$",
            f"--benchmark_repetitions={repetitions}", f"--benchmark_min_time={min_time:g}",
            f"--benchmark_out={out_path}", "--benchmark_out_format=json", *job.args]
    if os.path.exists(out_path):
        os.unlink(out_path)
    timeout = job_timeout_s(repetitions, min_time)
    try:
        done = subprocess.run([bench] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=timeout,
                              env=child_env(":".join(p for p in (heap_counter, job.preload_path)
                                                      if p), job.heap))
    except subprocess.TimeoutExpired:
        return None, f"{job.display}: no result within {timeout:.0f}s"
    doc = _read_json(out_path)
    if done.returncode != 0 or not doc or not doc.get("benchmarks"):
        why = (done.stderr or "").strip().splitlines()[-3:]
        return None, f"{job.display}: exit {done.returncode}" + (": " + " | ".join(why) if why
                                                               else "")
    if job.preload:
        results.tag_preload(doc, job.preload)
    results.tag_heap(doc, job.heap)
    errors = [e.get("error_message", "error") for e in doc["benchmarks"] if e.get("error_occurred")]
    return doc, (f"{job.display}: {errors[0]}" if errors else None)


def _mark_round(doc: dict, round_index: int) -> None:
    """Each process ran one repetition: number it by its round, as one process would have."""
    for entry in doc.get("benchmarks", []):
        if entry.get("run_type", "iteration") == "iteration":
            entry["repetition_index"] = round_index


def run(bench: str, steps: list[Step], min_time: float, progress: Progress,
        heap_counter: str = "", run_step=None) -> Outcome:
    """Runs every step in turn, one repetition per process; a job that failed once is not run
    again (its failure is listed once). Counting steps run with heap_counter preloaded for
    COUNTING_MIN_TIME at most, and their counts go into the job's timed results; a failed
    counting step is listed and leaves the job's rows without counts. Ctrl-C stops the run and
    keeps what finished. run_step(step, out_path) -> (doc, failure) runs another program than
    pmrkit_bench (the replay report's pmrkit-replay)."""
    docs, idle_docs, failures = [], [], []
    counts: dict[str, dict[str, float]] = {}  # entry name -> allocs_per_op, bytes_per_op
    failed: set[Job] = set()
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="pmrkit-report-") as tmp:
        out_path = os.path.join(tmp, "run.json")
        try:
            for step in steps:
                if step.job in failed:
                    progress.finish_one()
                    continue
                progress.start(step.display)
                if run_step:
                    doc, failure = run_step(step, out_path)
                elif step.counting:
                    doc, failure = run_one(bench, step.job, 1, min(min_time, COUNTING_MIN_TIME),
                                           out_path, heap_counter)
                else:
                    doc, failure = run_one(bench, step.job, 1, min_time, out_path)
                progress.finish_one()
                if doc is not None and step.counting:
                    counts.update(_counts_of(doc))
                elif doc is not None:
                    _mark_round(doc, step.round)
                    # an entry that reported an error is kept, and listed
                    (idle_docs if step.job.heap == IDLE else docs).append(doc)
                if failure and step.counting:
                    failures.append(failure.replace(step.job.display, step.display, 1))
                    progress.note("FAILED " + failures[-1])
                elif failure:
                    failed.add(step.job)
                    failures.append(failure)
                    progress.note("FAILED " + failure)
        except KeyboardInterrupt:
            interrupted = True
            progress.note("interrupted: reporting the benchmarks that finished")
    for doc in docs + idle_docs:
        _add_counts(doc, counts)
    # Warm documents first: the merged context (the first document's) is a warm process's.
    return Outcome(results.merge(docs + idle_docs), failures, interrupted)


def _counts_of(doc: dict) -> dict[str, dict[str, float]]:
    """A counting process's allocs_per_op and bytes_per_op, by entry name."""
    return {e["name"]: {c: e[c] for c in COUNTED if c in e}
            for e in doc.get("benchmarks", [])
            if e.get("run_type", "iteration") == "iteration" and not e.get("error_occurred")
            and all(c in e for c in COUNTED)}


def _add_counts(doc: dict, counts: dict[str, dict[str, float]]) -> None:
    """Gives each timed entry the counts of its counting process, which replace any the timed
    process reported itself (it has none unless run with a counter preloaded by hand)."""
    for entry in doc.get("benchmarks", []):
        if entry.get("run_type", "iteration") == "iteration" and entry.get("name") in counts:
            entry.update(counts[entry["name"]])


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
