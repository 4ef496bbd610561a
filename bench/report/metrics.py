"""The metrics the report shows, with their headers and number formats (benchstat's style)."""

from __future__ import annotations

import dataclasses
from typing import Callable


def format_time(ns: float) -> str:
    for limit, unit, scale in ((1e3, "ns", 1.0), (1e6, "µs", 1e3), (1e9, "ms", 1e6)):
        if abs(ns) < limit:
            return f"{ns / scale:.4g}{unit}"
    return f"{ns / 1e9:.4g}s"


def format_bytes(b: float) -> str:
    if 0 < b < 1:
        return "<1B"  # amortised: a pool's rare refill spread over millions of ops
    for limit, unit, scale in ((1024, "B", 1), (1024**2, "KiB", 1024), (1024**3, "MiB", 1024**2)):
        if abs(b) < limit:
            return f"{b / scale:.4g}{unit}"
    return f"{b / 1024**3:.4g}GiB"


def format_count(n: float) -> str:
    if 0 < n < 0.01:
        return "<0.01"  # amortised, as for bytes
    return f"{n:.4g}"


def format_rate(r: float) -> str:
    return f"{r:.4g}"


def format_times(r: float) -> str:
    """A ratio such as held/live: 1.21x."""
    if r < 10:
        return f"{r:.2f}x"
    return f"{r:.1f}x" if r < 100 else f"{r:.0f}x"


@dataclasses.dataclass(frozen=True)
class Metric:
    key: str          # as in results.METRICS
    header: str       # table column header
    csv: str          # CSV column prefix
    format: Callable[[float], str]
    show_spread: bool  # timings vary run to run; counters do not
    lower_is_better: bool = True
    # A "vs base" column in a run's table. The memory figures have none: held/live already
    # says how far a row is from the floor, and the table stays readable on a terminal.
    delta_in_run: bool = True


TIME = Metric("ns_per_op", "time/op", "ns_per_op", format_time, True)
# The same row's time in an idle process (bench/heap_state.hpp), beside the warm time/op.
IDLE_TIME = Metric("idle_ns_per_op", "idle time/op", "idle_ns_per_op", format_time, True,
                   delta_in_run=False)
ALLOCS = Metric("allocs_per_op", "allocs/op", "allocs_per_op", format_count, False)
BYTES = Metric("bytes_per_op", "B/op", "bytes_per_op", format_bytes, False)
# Page faults the timed loop took, per op: first touches of new memory. A fresh resource whose
# upstream gave pages back to the kernel (glibc trimming its heap) pays them again every op,
# which is where such a row's time goes. A count near zero in most rows: no spread, whose
# percentage of a median of 1 would say nothing.
FAULTS = Metric("faults_per_op", "faults/op", "faults_per_op", format_count, False,
                delta_in_run=False)
THROUGHPUT = Metric("mb_per_s", "MB/s", "mb_per_s", format_rate, True, lower_is_better=False)
PEAK_HELD = Metric("peak_held_bytes", "peak held", "peak_held_bytes", format_bytes, False,
                   delta_in_run=False)
PEAK_LIVE = Metric("peak_live_bytes", "peak live", "peak_live_bytes", format_bytes, False,
                   delta_in_run=False)
HELD_OVER_LIVE = Metric("held_over_live", "held/live", "held_over_live", format_times, False,
                        delta_in_run=False)

# In table order. MB/s is shown only for workloads that process bytes, the memory figures and
# faults/op only when the bench reported them (a results.json from before they existed has
# none), the idle time only where the run measured it.
TABLE_METRICS = (TIME, IDLE_TIME, ALLOCS, BYTES, FAULTS, PEAK_HELD, HELD_OVER_LIVE, THROUGHPUT)
OPTIONAL_METRICS = (IDLE_TIME, FAULTS, PEAK_HELD, HELD_OVER_LIVE, THROUGHPUT)
MEMORY_METRICS = (PEAK_HELD, PEAK_LIVE, HELD_OVER_LIVE)
