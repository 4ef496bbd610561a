"""Charts of a run (matplotlib, PNG): per workload, time/op and B/op per strategy with fresh and
pooled side by side, and time/op against peak held memory (each row a point, the Pareto front
marked); and throughput against threads for the thread-scaling patterns."""

from __future__ import annotations

import os
import re

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

import analysis  # noqa: E402
import metrics as m  # noqa: E402

VARIANT_COLORS = {"fresh": "#4c72b0", "pooled": "#dd8452", "shared": "#8172b3", "": "#4c72b0"}
REFERENCE_COLOR = "#2a9d3a"
DPI = 100


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _time_scale(values: list[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    for limit, scale, unit in ((1e3, 1.0, "ns"), (1e6, 1e3, "µs"), (1e9, 1e6, "ms")):
        if top < limit:
            return scale, unit
    return 1e9, "s"


def _bytes_scale(values: list[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    for limit, scale, unit in ((1024, 1, "B"), (1024**2, 1024, "KiB"), (1024**3, 1024**2, "MiB")):
        if top < limit:
            return scale, unit
    return 1024**3, "GiB"


def _categories(table: analysis.Table) -> tuple[list[str], list[str], dict]:
    """Bar groups (one per strategy, preload rows on their own) and the variants in each."""
    groups: dict[str, dict[str, analysis.AnalyzedRow]] = {}
    variants: list[str] = []
    for row in table.rows:
        if row.role == "reference":
            continue
        group = row.key.strategy + (f"\n[{row.key.preload}]" if row.key.preload else "")
        groups.setdefault(group, {})[row.key.variant] = row
        if row.key.variant not in variants:
            variants.append(row.key.variant)
    return list(groups), variants, groups


def workload_chart(table: analysis.Table, path: str) -> str:
    """time/op and B/op side by side, a bar per variant, the reference as a dashed line."""
    names, variants, groups = _categories(table)
    reference = next((r for r in table.rows if r.role == "reference"), None)
    panels = [("ns_per_op", "time/op", _time_scale), ("bytes_per_op", "B/op", _bytes_scale)]
    height = 1.2 + 0.42 * max(1, len(names)) * max(1, len(variants)) ** 0.5
    fig, axes = plt.subplots(1, 2, figsize=(11, height), sharey=True)
    bar = 0.8 / max(1, len(variants))
    for ax, (metric, title, scaler) in zip(axes, panels):
        values = [r.median(metric) for g in groups.values() for r in g.values()
                  if r.median(metric) is not None]
        if reference and reference.median(metric) is not None:
            values.append(reference.median(metric))
        scale, unit = scaler(values)
        for v_index, variant in enumerate(variants):
            ys, widths = [], []
            for n_index, name in enumerate(names):
                row = groups[name].get(variant)
                if row is not None and row.median(metric) is not None:
                    ys.append(n_index + (v_index - (len(variants) - 1) / 2) * bar)
                    widths.append(row.median(metric) / scale)
            ax.barh(ys, widths, height=bar * 0.95, color=VARIANT_COLORS.get(variant, "#888"),
                    label=variant or "strategy")
        if reference and reference.median(metric) is not None:
            ax.axvline(reference.median(metric) / scale, color=REFERENCE_COLOR, linestyle="--",
                       label=reference.label)
        ax.set_title(f"{title} ({unit}), lower is better", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
    axes[0].set_yticks(range(len(names)))
    axes[0].set_yticklabels(names, fontsize=9)
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper right", ncol=len(labels), frameon=False)
    fig.suptitle(table.title, fontsize=12, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


ROLE_COLORS = {"baseline": "#333333", "strategy": "#4c72b0", "preload": "#6a4c93",
               "plain": "#8c8c8c", "reference": REFERENCE_COLOR}
PARETO_COLOR = "#d1495b"


def _log_if_wide(axis_setter, values: list[float]) -> bool:
    positive = [v for v in values if v > 0]
    if len(positive) == len(values) and positive and max(positive) / min(positive) > 20:
        axis_setter("log")
        return True
    return False


def memory_chart(table: analysis.Table, path: str) -> str | None:
    """time/op against peak held, one point per row; the rows no other row beats in both
    (analysis.verdict's Pareto front) filled and labelled in bold, the others hollow; the
    reference row, and rows left out of verdicts, drawn but never on the front. None when
    fewer than two rows report both figures."""
    rows = [r for r in table.rows
            if r.median("ns_per_op") is not None and r.median("peak_held_bytes") is not None]
    if len(rows) < 2:
        return None
    front = {id(r) for r in analysis.verdict(table).pareto}
    # Plotted in one unit each, so a linear axis gets round ticks (2KiB, 4KiB, ...).
    b_scale, _ = _bytes_scale([r.median("peak_held_bytes") for r in rows])
    t_scale, _ = _time_scale([r.median("ns_per_op") for r in rows])

    def point(row: analysis.AnalyzedRow) -> tuple[float, float]:
        return row.median("peak_held_bytes") / b_scale, row.median("ns_per_op") / t_scale
    fig, ax = plt.subplots(figsize=(11, 6.5))
    for row in rows:
        x, y = point(row)
        color = ROLE_COLORS.get(row.role, "#888")
        on_front = id(row) in front
        ax.scatter([x], [y], s=70 if on_front else 40, marker="D" if on_front else "o",
                   facecolors=PARETO_COLOR if on_front else "none",
                   edgecolors=PARETO_COLOR if on_front else color, linewidths=1.3, zorder=3)
        ax.annotate(row.label, (x, y), xytext=(5, 4), textcoords="offset points",
                    fontsize=8 if on_front else 7, color="#111" if on_front else color,
                    fontweight="bold" if on_front else "normal")
    front_points = sorted(point(r) for r in rows if id(r) in front)
    if len(front_points) > 1:  # the staircase that bounds what the front dominates
        ax.step(*zip(*front_points), where="post", color=PARETO_COLOR, alpha=0.5, linewidth=1,
                zorder=2)
    log_x = _log_if_wide(ax.set_xscale, [point(r)[0] for r in rows])
    log_y = _log_if_wide(ax.set_yscale, [point(r)[1] for r in rows])
    if log_x:  # powers of two read as byte sizes: 64B, 128B, ... 1KiB
        ax.xaxis.set_major_locator(ticker.LogLocator(base=2, numticks=12))
    for axis, formatter, scale in ((ax.xaxis, m.format_bytes, b_scale),
                                   (ax.yaxis, m.format_time, t_scale)):
        axis.set_major_formatter(ticker.FuncFormatter(
            lambda v, _, f=formatter, k=scale: f(v * k)))
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(f"peak held{' (log scale)' if log_x else ''}, lower is better")
    ax.set_ylabel(f"time/op{' (log scale)' if log_y else ''}, lower is better")
    ax.scatter([], [], marker="D", s=60, color=PARETO_COLOR,
               label="Pareto front: no other row is both faster and holds less")
    ax.scatter([], [], marker="o", s=40, facecolors="none", edgecolors=ROLE_COLORS["strategy"],
               label="beaten in both by some row")
    # Below the axes: inside, it would cover the labels of points in any corner.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"{table.title}: time against memory held", fontsize=12, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def thread_scaling_chart(workload: str, tables: list[analysis.Table], path: str) -> str:
    """Throughput (Mops/s, all threads together) against the number of threads, per row."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for table in sorted(tables, key=lambda t: t.threads):
        for row in table.rows:
            ns = row.median("ns_per_op")
            if ns:
                lines.setdefault(row.label, []).append((table.threads, 1e3 / ns))
    fig, ax = plt.subplots(figsize=(9, 5))
    palette = plt.get_cmap("tab20").colors
    for index, (label, points) in enumerate(lines.items()):
        xs, ys = zip(*points)
        if "bare_list" in label:
            style, color = "--", "black"
        else:
            style, color = ("-." if "preload" in label else "-"), palette[index % len(palette)]
        ax.plot(xs, ys, style, color=color, marker="o", label=label)
    values = [y for points in lines.values() for _, y in points]
    if values and min(values) > 0 and max(values) / min(values) > 20:
        ax.set_yscale("log")  # strategies differ by orders of magnitude here
    threads = sorted({t.threads for t in tables})
    ax.set_xticks(threads)
    ax.set_xlabel("threads")
    ax.set_ylabel("Mops/s, all threads (higher is better)")
    ax.set_title(f"{workload}: thread scaling", fontsize=12)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def write_all(tables: list[analysis.Table], directory: str) -> dict[str, str]:
    """Every chart of a run as charts/<name>.png; returns {table title, memory_key(title) or
    scaling_key(workload): path}."""
    os.makedirs(directory, exist_ok=True)
    for stale in os.listdir(directory):
        if stale.endswith(".png"):
            os.unlink(os.path.join(directory, stale))
    written = {}
    by_workload: dict[str, list[analysis.Table]] = {}
    for table in tables:
        by_workload.setdefault(table.workload, []).append(table)
        written[table.title] = workload_chart(
            table, os.path.join(directory, slug(table.title) + ".png"))
        memory = memory_chart(table, os.path.join(directory,
                                                  "memory_" + slug(table.title) + ".png"))
        if memory:
            written[memory_key(table.title)] = memory
    for workload, group in by_workload.items():
        if len(group) > 1:
            path = os.path.join(directory, "thread_scaling_" + slug(workload) + ".png")
            written[scaling_key(workload)] = thread_scaling_chart(workload, group, path)
    return written


def memory_key(title: str) -> str:
    return f"{title} time vs peak held"


def scaling_key(workload: str) -> str:
    return f"{workload} thread scaling"
