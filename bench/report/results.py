"""Reading pmrkit_bench's Google Benchmark JSON into rows of samples.

A benchmark name such as ``Serialization/with_metrics/size_class:max_pooled=128K/pooled`` is
split into a RowKey: the workload (every path element that is neither the strategy nor the
variant), the strategy (the element naming a known strategy), the variant (fresh, pooled,
shared or limit; none for the Alloc* patterns) and the thread count. Runs made with a replaced
process allocator (LD_PRELOAD) carry a ``pmrkit_preload`` field and a `` [preload=NAME]`` name
suffix.

Every run names its heap state (bench/heap_state.hpp): the context's ``pmrkit_heap_state`` for the
document (a merged report's: the state of its tables, warm), and a ``pmrkit_heap`` field per
entry where the report's runner ran processes in both states. An entry whose state differs from
the document's is not a row of its own: its time joins the same row's ``idle_ns_per_op``
samples, the figure shown beside the row's time.

With repetitions, Google Benchmark writes one ``run_type: iteration`` entry per repetition and
then aggregates; the per-repetition entries are the samples. A file holding only aggregates
(``--benchmark_report_aggregates_only``) yields one sample per row, from the mean. Each time
sample keeps its entry's ``repetition_index`` (the report's runner numbers each process by its
round), so rows can be compared round by round.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from typing import Iterable

# The strategies a run's binary offered (runner.strategy_names asks it) are kept in the JSON
# context under this key, so that a file read back knows them. Without it a strategy is still
# recognised by its position in the benchmark name (before the variant, or after an Alloc*
# pattern's name).
STRATEGIES_FIELD = "pmrkit_strategies"
BASELINE_STRATEGY = "new_delete"
REFERENCE_STRATEGY = "bare_list"  # the Alloc* patterns' "no allocator at all" row
# The preload rows replace the process allocator, so they run the strategy that calls it the
# way a program without pmr does (std::malloc); a binary without it falls back to the baseline.
PRELOAD_STRATEGY = "malloc"
# Bench-only rows that are neither a strategy a user can pick nor the table's reference: the
# plainest wrapper over a library, shown next to pmrkit's strategy over the same library.
PLAIN_WRAPPERS = ("mimalloc_plain",)
# The rival every row's time is also held against, round by round (analysis.py's vs_rival):
# the plainest wrapper over the fastest general-purpose allocator here, mimalloc at its fastest
# correct path (mi_malloc/mi_free), which the size_class strategy exists to beat.
RIVAL_STRATEGY = "mimalloc_plain"
VARIANTS = ("fresh", "pooled", "shared", "limit")
BASELINE_VARIANT = "fresh"
LIMIT_VARIANT = "limit"

# Name elements Google Benchmark appends that say how a benchmark was run, not what it is.
_RUN_MODIFIER = re.compile(
    r"^(real_time|process_time|manual_time|(min_time|min_warmup_time|iterations|repetitions):.*)$")
_PRELOAD_SUFFIX = re.compile(r"\s*\[preload=([^\]]+)\]$")
PRELOAD_FIELD = "pmrkit_preload"

_TIME_UNIT_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# The metrics a row carries, by the key used everywhere else (tables, CSV, charts).
# held_over_live is computed per repetition from the two counters before it.
METRICS = ("ns_per_op", "idle_ns_per_op", "allocs_per_op", "bytes_per_op", "faults_per_op",
           "mb_per_s", "items_per_s", "peak_held_bytes", "peak_live_bytes", "held_over_live")
# The metrics of a row's one counting process (runner.py), which the runner copies into every
# timed repetition. The copies are one measurement, not samples: a row keeps one value of each
# (the median, should a hand-made file hold several), so no test mistakes copies for agreement.
COUNTED = ("allocs_per_op", "bytes_per_op")
# The heap state of a document (context) and of an entry (set by the runner; see the module
# comment). A document that names none predates the states: it ran idle.
HEAP_STATE_FIELD = "pmrkit_heap_state"
HEAP_BACKGROUND_FIELD = "pmrkit_heap_background_bytes"
HEAP_FIELD = "pmrkit_heap"
WARM = "warm"
IDLE = "idle"
IDLE_TIME = "idle_ns_per_op"
# How the bench measured peak_held_bytes: per row in the benchmark's label ("held=rss"), per
# strategy in the context ({"malloc": "mallinfo2", ...}).
HELD_METHOD_FIELD = "pmrkit_held_method"
# A repetition's peak held that read below its peak live: a failed measurement, not a figure.
HELD_UNMEASURED = "held_unmeasured_bytes"
_HELD_LABEL = re.compile(r"(?:^|[ ,;])held=([A-Za-z0-9_]+)")
# Phase workloads (AllocPhases) report what was held and live at the end of each phase.
# Google Benchmark writes counters in alphabetical order, so the phases' order is known here;
# a phase not listed goes after these.
_PHASE_COUNTER = re.compile(r"^phase_(.+)_(held|live)_bytes$")
PHASE_ORDER = ("grow", "free90", "remix")


@dataclasses.dataclass(frozen=True, order=True)
class RowKey:
    workload: str
    threads: int
    strategy: str  # "" for a limit row
    variant: str   # "" for an Alloc* pattern row
    preload: str   # "" unless the process allocator was replaced

    @property
    def is_pattern(self) -> bool:
        """An allocator pattern (AllocPairs, ...): no fresh/pooled variants."""
        return self.variant == ""

    @property
    def is_reference(self) -> bool:
        return self.variant == LIMIT_VARIANT or self.strategy == REFERENCE_STRATEGY

    @property
    def is_plain_wrapper(self) -> bool:
        return self.strategy in PLAIN_WRAPPERS

    @property
    def label(self) -> str:
        """How the row is named in tables: strategy/variant, plus the preload tag."""
        if self.variant == LIMIT_VARIANT:
            text = LIMIT_VARIANT
        elif self.variant:
            text = f"{self.strategy}/{self.variant}"
        else:
            text = self.strategy
        if self.preload:
            text += f" [preload={self.preload}]"
        return text

    @property
    def table(self) -> tuple[str, int]:
        """Rows that are compared with each other share a table: same workload, same threads."""
        return (self.workload, self.threads)


@dataclasses.dataclass
class Row:
    key: RowKey
    name: str  # the benchmark's run name as Google Benchmark wrote it (without the tag)
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    held_method: str = ""  # how peak_held_bytes was measured ("upstream", "rss", ...), "" unknown
    phases: list[str] = dataclasses.field(default_factory=list)  # phase names, in order
    # The repetition (round) of each ns_per_op sample, in the same order; None where the entry
    # had no repetition_index (an aggregate).
    rounds: list[int | None] = dataclasses.field(default_factory=list)

    def values(self, metric: str) -> list[float]:
        return self.samples.get(metric, [])

    @property
    def repetitions(self) -> int:
        return len(self.values("ns_per_op"))


@dataclasses.dataclass
class ResultSet:
    rows: dict[RowKey, Row]
    context: dict
    errors: list[tuple[str, str]]  # (benchmark name, message) of runs that reported an error

    def error_notes(self, prefix: str = "") -> list[str]:
        """One line per run that reported an error (its row has no such run), de-duplicated:
        "PREFIXerror in NAME: MESSAGE"."""
        return list(dict.fromkeys(f"{prefix}error in {name}: {message}"
                                  for name, message in self.errors))

    def tables(self) -> dict[tuple[str, int], list[Row]]:
        """Rows grouped by table, both in order of first appearance."""
        grouped: dict[tuple[str, int], list[Row]] = {}
        for row in self.rows.values():
            grouped.setdefault(row.key.table, []).append(row)
        return grouped

    @property
    def heap_state(self) -> str:
        """The heap state of the rows' figures: warm, idle, or "" for a run from before the
        bench named it."""
        return str(self.context.get(HEAP_STATE_FIELD, ""))

    def strategies(self) -> list[str]:
        """The strategies, in the binary's order where the context records it (a run's rows
        are interleaved in random order), else in order of first appearance."""
        seen: dict[str, None] = {}
        for name in self.context.get(STRATEGIES_FIELD, ()):
            if any(key.strategy == name for key in self.rows):
                seen.setdefault(name, None)
        for key in self.rows:
            if key.strategy and not key.is_reference and not key.is_plain_wrapper:
                seen.setdefault(key.strategy, None)
        return list(seen)


def strategy_base(element: str) -> str:
    """``size_class:max_pooled=128K`` -> ``size_class``: a spec's strategy name."""
    return element.split(":", 1)[0]


def parse_name(name: str, known: Iterable[str] = (), preload: str = "") -> RowKey:
    """Splits a benchmark run name into its RowKey (see the module comment)."""
    known = set(known) | {REFERENCE_STRATEGY, *PLAIN_WRAPPERS}
    tag = _PRELOAD_SUFFIX.search(name)
    if tag:
        preload = preload or tag.group(1)
        name = name[:tag.start()]
    threads = 1
    parts = []
    for element in name.split("/"):
        if element.startswith("threads:") and element[8:].isdigit():
            threads = int(element[8:])
        elif not _RUN_MODIFIER.match(element):
            parts.append(element)
    group, rest = parts[0], parts[1:]

    variant_at = max((i for i, e in enumerate(rest) if e in VARIANTS), default=None)
    variant = rest[variant_at] if variant_at is not None else ""
    strategy_at = next((i for i, e in enumerate(rest)
                        if i != variant_at and strategy_base(e) in known), None)
    if strategy_at is None and variant not in ("", LIMIT_VARIANT) and variant_at > 0:
        strategy_at = variant_at - 1   # an unknown strategy sits just before its variant
    if strategy_at is None and not variant and rest:
        strategy_at = 0                # Alloc* patterns: <Pattern>/<strategy>
    strategy = rest[strategy_at] if strategy_at is not None else ""
    extra = [e for i, e in enumerate(rest) if i not in (variant_at, strategy_at)]
    return RowKey(workload="/".join([group] + extra), threads=threads, strategy=strategy,
                  variant=variant, preload=preload)


def _metrics_of(entry: dict) -> dict[str, float]:
    """One benchmark entry's metrics, normalised: time in ns/op, throughput in MB/s. A value
    that is not a finite number (Google Benchmark writes NaN for a counter it could not
    compute, and inf for a rate over no time) is left out, as if the entry had not reported it:
    one such sample must not turn a row's median, or its test, into nonsense."""
    out = {}
    scale = _TIME_UNIT_TO_NS.get(entry.get("time_unit", "ns"), 1.0)
    if "real_time" in entry:
        out["ns_per_op"] = float(entry["real_time"]) * scale
    for counter in ("allocs_per_op", "bytes_per_op", "faults_per_op", "peak_held_bytes",
                    "peak_live_bytes"):
        if counter in entry:
            out[counter] = float(entry[counter])
    if out.get("peak_held_bytes") is not None and out.get("peak_live_bytes"):
        if out["peak_held_bytes"] < out["peak_live_bytes"]:
            # Impossible: the probe missed memory the allocator held before the row (an RSS
            # high-water mark set earlier). Kept apart, so it is shown as unmeasured and
            # judges nothing.
            out[HELD_UNMEASURED] = out.pop("peak_held_bytes")
        else:
            out["held_over_live"] = out["peak_held_bytes"] / out["peak_live_bytes"]
    for field, value in entry.items():
        if _PHASE_COUNTER.match(field):
            out[field] = float(value)
    if "bytes_per_second" in entry:
        out["mb_per_s"] = float(entry["bytes_per_second"]) / 1e6
    if "items_per_second" in entry:
        out["items_per_s"] = float(entry["items_per_second"])
    return {metric: value for metric, value in out.items() if math.isfinite(value)}


def phase_names(entry: dict) -> list[str]:
    """The phases an entry reports, in the phases' order (PHASE_ORDER, then the others)."""
    names: dict[str, None] = {}
    for field in entry:
        match = _PHASE_COUNTER.match(field)
        if match:
            names.setdefault(match.group(1), None)
    rank = {name: i for i, name in enumerate(PHASE_ORDER)}
    return sorted(names, key=lambda n: rank.get(n, len(rank)))


def phase_metric(phase: str, what: str) -> str:
    """The sample key of a phase figure: what is "held", "live" or "held_over_live"."""
    return f"phase_{phase}_{what}" + ("" if what == "held_over_live" else "_bytes")


def held_method_of(entry: dict, context: dict, strategy: str) -> str:
    """How the row's peak_held_bytes was measured: the row's label, else the context's map."""
    match = _HELD_LABEL.search(entry.get("label", ""))
    if match:
        return match.group(1)
    by_strategy = context.get(HELD_METHOD_FIELD, {})
    if isinstance(by_strategy, str):  # Google Benchmark's context holds strings only
        try:
            by_strategy = json.loads(by_strategy)
        except json.JSONDecodeError:
            return ""
    if not isinstance(by_strategy, dict):
        return ""
    return by_strategy.get(strategy, by_strategy.get(strategy_base(strategy), ""))


def run_name_of(entry: dict) -> str:
    return entry.get("run_name") or entry.get("name", "")


def from_json(doc: dict, known: Iterable[str] | None = None) -> ResultSet:
    """Builds a ResultSet from one Google Benchmark JSON document (merged or not). `known`
    defaults to the strategies recorded in the document's context (STRATEGIES_FIELD)."""
    if known is None:
        known = doc.get("context", {}).get(STRATEGIES_FIELD, ())
    known = tuple(known)
    entries = doc.get("benchmarks", [])
    state = str(doc.get("context", {}).get(HEAP_STATE_FIELD, ""))
    errors = []
    with_iterations = {(run_name_of(e), e.get(PRELOAD_FIELD, ""), e.get(HEAP_FIELD, state))
                       for e in entries if e.get("run_type", "iteration") == "iteration"}
    rows: dict[RowKey, Row] = {}
    other_state: list[tuple[RowKey, dict]] = []
    for entry in entries:
        name, preload = run_name_of(entry), entry.get(PRELOAD_FIELD, "")
        heap = entry.get(HEAP_FIELD, state)
        if entry.get("error_occurred"):
            errors.append((name + (f" [heap={heap}]" if heap != state else ""),
                           entry.get("error_message", "error")))
            continue
        if entry.get("run_type", "iteration") == "aggregate":
            # Only when no per-repetition entries exist, and then only the mean.
            if ((name, preload, heap) in with_iterations
                    or entry.get("aggregate_name") != "mean"):
                continue
        key = parse_name(name, known, preload)
        if heap != state:
            other_state.append((key, entry))
            continue
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(key=key, name=_PRELOAD_SUFFIX.sub("", name))
        metrics = _metrics_of(entry)
        for metric, value in metrics.items():
            row.samples.setdefault(metric, []).append(value)
        if "ns_per_op" in metrics:
            row.rounds.append(entry.get("repetition_index")
                              if entry.get("run_type", "iteration") == "iteration" else None)
        for phase in phase_names(entry):
            if phase not in row.phases:
                row.phases.append(phase)
            held = entry.get(f"phase_{phase}_held_bytes")
            live = entry.get(f"phase_{phase}_live_bytes")
            if held is not None and live and math.isfinite(float(held) / float(live)):
                row.samples.setdefault(phase_metric(phase, "held_over_live"), []).append(
                    float(held) / float(live))
        if "peak_held_bytes" in entry and not row.held_method:
            row.held_method = held_method_of(entry, doc.get("context", {}), key.strategy)
    for row in rows.values():
        for metric in COUNTED:
            if row.samples.get(metric):
                row.samples[metric] = [statistics.median(row.samples[metric])]
    for key, entry in other_state:  # a row that ran only idle has nothing to stand beside
        time = _metrics_of(entry).get("ns_per_op")
        if key in rows and time is not None and entry.get(HEAP_FIELD) == IDLE:
            rows[key].samples.setdefault(IDLE_TIME, []).append(time)
    return ResultSet(rows=rows, context=doc.get("context", {}), errors=errors)


def load(path: str, known: Iterable[str] | None = None) -> ResultSet:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:  # missing, a directory, unreadable: the reason, not a traceback
        raise SystemExit(f"{path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"{path}: not a Google Benchmark JSON file ({e}); write one with "
                         "--benchmark_out=FILE --benchmark_out_format=json") from None
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise SystemExit(f"{path}: no 'benchmarks' array; expected Google Benchmark JSON output")
    return from_json(doc, known)


def tag_preload(doc: dict, preload: str) -> dict:
    """Marks every entry of a run made under LD_PRELOAD, so merged files keep rows apart."""
    for entry in doc.get("benchmarks", []):
        entry[PRELOAD_FIELD] = preload
        for field in ("name", "run_name"):
            if field in entry:
                base = entry[field]
                if field == "name" and entry.get("run_type") == "aggregate":
                    # "X_mean" -> "X [preload=p]_mean" would not parse back; keep the suffix last.
                    base = entry.get("run_name", base)
                    entry[field] = f"{base} [preload={preload}]_{entry.get('aggregate_name', '')}"
                else:
                    entry[field] = f"{base} [preload={preload}]"
    return doc


def tag_heap(doc: dict, heap: str) -> dict:
    """Marks every entry with the heap state its process ran in (see the module comment)."""
    for entry in doc.get("benchmarks", []):
        entry[HEAP_FIELD] = heap
    return doc


def merge(docs: list[dict], extra_context: dict | None = None) -> dict:
    """One document from several runs' documents: the first context, every benchmark entry."""
    merged = {"context": dict(docs[0].get("context", {})) if docs else {}, "benchmarks": []}
    if extra_context:
        merged["context"].update(extra_context)
    for doc in docs:
        merged["benchmarks"].extend(doc.get("benchmarks", []))
    return merged
