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


@dataclasses.dataclass(frozen=True)
class Metric:
    key: str          # as in results.METRICS
    header: str       # table column header
    csv: str          # CSV column prefix
    format: Callable[[float], str]
    show_spread: bool  # timings vary run to run; counters do not
    lower_is_better: bool = True


TIME = Metric("ns_per_op", "time/op", "ns_per_op", format_time, True)
ALLOCS = Metric("allocs_per_op", "allocs/op", "allocs_per_op", format_count, False)
BYTES = Metric("bytes_per_op", "B/op", "bytes_per_op", format_bytes, False)
THROUGHPUT = Metric("mb_per_s", "MB/s", "mb_per_s", format_rate, True, lower_is_better=False)

# In table order. MB/s is shown only for workloads that process bytes.
TABLE_METRICS = (TIME, ALLOCS, BYTES, THROUGHPUT)
OPTIONAL_METRICS = (THROUGHPUT,)
