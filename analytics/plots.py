"""PNG plots of the job's tables, rendered headless (matplotlib's Agg backend).

Series are collected to the driver; when a table has more than :data:`MAX_POINTS` windows per
line it is re-aggregated in Spark into coarser windows first, so plotting stays cheap for any
input size.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

from analytics.job import KEYS, MASTER_ROLES, JobResult

MAX_POINTS = 2000


def _coarse(
    table: DataFrame, window_ms: int, series: list[str], values: dict[str, str]
) -> tuple[list, int]:
    """The table's rows ordered by window, re-aggregated into windows of the returned step
    when it would have more than :data:`MAX_POINTS` per line."""
    span = table.agg(F.min("window_ms"), F.max("window_ms")).collect()[0]
    if span[0] is None:
        return [], window_ms
    step = window_ms
    while (span[1] - span[0]) / step > MAX_POINTS:
        step *= 2
    if step != window_ms:
        scale = window_ms / step
        aggs = [
            (F.sum(c) * scale if how == "rate" else F.max(c)).alias(c) for c, how in values.items()
        ]
        table = table.withColumn("window_ms", F.floor(F.col("window_ms") / step) * step)
        table = table.groupBy(*series, "window_ms").agg(*aggs)
    return table.select(*series, "window_ms", *values).orderBy("window_ms").collect(), step


def _time(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _lines(rows: list, series: list[str], value: str, step: int) -> dict[str, tuple[list, list]]:
    """Per series: times and values; a window without records breaks the line (NaN) instead of
    being bridged, so an outage shows as a hole."""
    out: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    last: dict[str, int] = {}
    for r in rows:
        if r[value] is None:
            continue
        name = "/".join(str(r[s]) for s in series)
        xs, ys = out[name]
        if name in last and r["window_ms"] - last[name] > step:
            xs.append(_time(last[name] + step))
            ys.append(float("nan"))
        last[name] = r["window_ms"]
        xs.append(_time(r["window_ms"]))
        ys.append(r[value])
    return out


MAX_LEGEND = 12


def _legend(ax: Any) -> None:
    """A legend when it fits; with many lines, a note instead (it would cover the plot)."""
    count = len(ax.get_lines())
    if 0 < count <= MAX_LEGEND:
        ax.legend(loc="best", fontsize="small")
    elif count:
        ax.text(0.01, 0.98, f"{count} lines", transform=ax.transAxes, va="top")


def _save(fig: Any, path: Path) -> Path:
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_all(result: JobResult, output: Path, window_ms: int) -> list[Path]:
    """``throughput.png``, ``latency.png`` and ``replication_lag.png`` under ``output/plots``."""
    out_dir = output / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    series = list(KEYS)
    rows, step = _coarse(
        result.tables["broker_throughput"],
        window_ms,
        series,
        {"in_msgs_per_s": "rate", "out_msgs_per_s": "rate"},
    )
    fig, ax = plt.subplots(figsize=(11, 5))
    for name, (xs, ys) in sorted(_lines(rows, series, "in_msgs_per_s", step).items()):
        ax.plot(xs, ys, label=f"{name} in")
    for f in result.failovers:
        if f.get("from_role") is not None and f.get("to_role") in MASTER_ROLES:
            ax.axvline(_time(f["event_ts"]), color="red", linestyle="--", linewidth=1)
            if f.get("gap_start_ms") is not None and f.get("gap_end_ms") is not None:
                ax.axvspan(
                    _time(f["gap_start_ms"]), _time(f["gap_end_ms"]), color="red", alpha=0.15
                )
    ax.set(
        title="Messages in per second per broker (red: failover, shaded: put gap)",
        xlabel="time (UTC)",
        ylabel="msgs/s",
    )
    _legend(ax)
    paths = [_save(fig, out_dir / "throughput.png")]
    fig, ax = plt.subplots(figsize=(11, 5))
    if "latency" in result.tables:
        lat, lstep = _coarse(
            result.tables["latency"],
            window_ms,
            series,
            {"p50_ms": "max", "p99_ms": "max", "max_ms": "max"},
        )
        for value in ("p50_ms", "p99_ms"):
            for name, (xs, ys) in sorted(_lines(lat, series, value, lstep).items()):
                ax.plot(xs, ys, label=f"{name} {value[:3]}")
    ax.set(title="Send latency percentiles", xlabel="time (UTC)", ylabel="ms")
    _legend(ax)
    paths.append(_save(fig, out_dir / "latency.png"))
    fig, ax = plt.subplots(figsize=(11, 5))
    rep, rstep = _coarse(
        result.tables["replication_lag"], window_ms, [*series, "slave_id"], {"max_lag_bytes": "max"}
    )
    for name, (xs, ys) in sorted(
        _lines(rep, [*series, "slave_id"], "max_lag_bytes", rstep).items()
    ):
        ax.plot(xs, ys, label=f"{name}")
    if not rep:
        ax.text(
            0.5,
            0.5,
            "no replication data (no slaves reported)",
            ha="center",
            transform=ax.transAxes,
        )
    ax.set(title="Replication lag per slave", xlabel="time (UTC)", ylabel="bytes")
    _legend(ax)
    paths.append(_save(fig, out_dir / "replication_lag.png"))
    return paths
