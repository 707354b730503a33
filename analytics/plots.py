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


def _coarse(table: DataFrame, window_ms: int, series: list[str], values: dict[str, str]) -> list:
    span = table.agg(F.min("window_ms"), F.max("window_ms")).collect()[0]
    if span[0] is None:
        return []
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
    return table.select(*series, "window_ms", *values).orderBy("window_ms").collect()


def _time(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _lines(rows: list, series: list[str], value: str) -> dict[str, tuple[list, list]]:
    out: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for r in rows:
        if r[value] is None:
            continue
        name = "/".join(str(r[s]) for s in series)
        out[name][0].append(_time(r["window_ms"]))
        out[name][1].append(r[value])
    return out


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
    rows = _coarse(
        result.tables["broker_throughput"],
        window_ms,
        series,
        {"in_msgs_per_s": "rate", "out_msgs_per_s": "rate"},
    )
    fig, ax = plt.subplots(figsize=(11, 5))
    for name, (xs, ys) in sorted(_lines(rows, series, "in_msgs_per_s").items()):
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
    ax.legend(loc="best", fontsize="small")
    paths = [_save(fig, out_dir / "throughput.png")]
    fig, ax = plt.subplots(figsize=(11, 5))
    if "latency" in result.tables:
        lat = _coarse(
            result.tables["latency"],
            window_ms,
            series,
            {"p50_ms": "max", "p99_ms": "max", "max_ms": "max"},
        )
        for value in ("p50_ms", "p99_ms"):
            for name, (xs, ys) in sorted(_lines(lat, series, value).items()):
                ax.plot(xs, ys, label=f"{name} {value[:3]}")
    ax.set(title="Send latency percentiles", xlabel="time (UTC)", ylabel="ms")
    ax.legend(loc="best", fontsize="small")
    paths.append(_save(fig, out_dir / "latency.png"))
    fig, ax = plt.subplots(figsize=(11, 5))
    rep = _coarse(
        result.tables["replication_lag"], window_ms, [*series, "slave_id"], {"max_lag_bytes": "max"}
    )
    for name, (xs, ys) in sorted(_lines(rep, [*series, "slave_id"], "max_lag_bytes").items()):
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
    if rep:
        ax.legend(loc="best", fontsize="small")
    paths.append(_save(fig, out_dir / "replication_lag.png"))
    return paths
