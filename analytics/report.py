"""Writing the job's outputs: Parquet tables, the summary (CSV and markdown).

Parquet tables are partitioned by ``date`` (UTC day of the window start) and ``broker``; the
failover timeline is small and written unpartitioned. The summary has one row per cluster,
broker group and topic over the whole input.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

from analytics.job import KEYS, MB, JobResult, latency_table

SUMMARY_FIELDS = (
    "cluster",
    "broker",
    "topic",
    "in_msgs",
    "in_mb",
    "out_msgs",
    "out_mb",
    "mean_in_msgs_per_s",
    "peak_in_msgs_per_s",
    "mean_in_mb_per_s",
    "mean_out_msgs_per_s",
    "broker_p50_ms",
    "broker_p99_ms",
    "broker_max_ms",
)


def write_tables(result: JobResult, output: Path) -> None:
    """Every table as Parquet under ``output/parquet/<table>/date=.../broker=...``.

    Rows are first shuffled by (date, broker), so each directory gets one file written by one
    task: without it every task writes a small file into every directory, and opening and
    closing those Parquet writers costs far more than the (small) tables themselves."""
    for name, table in result.tables.items():
        dated = table.withColumn("date", F.to_date(F.from_unixtime(F.col("window_ms") / 1000)))
        dated.repartition("date", "broker").write.mode("overwrite").partitionBy(
            "date", "broker"
        ).parquet(str(output / "parquet" / name))


def summary_rows(result: JobResult, window_ms: int) -> list[dict[str, Any]]:
    """One row per (cluster, broker, topic) over the whole input."""
    topics = result.tables["topic_throughput"]
    per_topic = topics.groupBy(*KEYS, "topic").agg(
        F.sum("dPutMsgs").alias("in_msgs"),
        F.sum("dPutBytes").alias("in_bytes"),
        F.sum("dGetMsgs").alias("out_msgs"),
        F.sum("dGetBytes").alias("out_bytes"),
        F.max("in_msgs_per_s").alias("peak_in_msgs_per_s"),
        F.min("window_ms").alias("first_ms"),
        F.max("window_ms").alias("last_ms"),
    )
    latency: dict[tuple[str, str], Any] = {}
    if result.bounds and result.latency_per_window is not None:
        per_broker = latency_table(result.latency_per_window, list(KEYS), result.bounds)
        for r in per_broker.collect():
            latency[(r["cluster"], r["broker"])] = r
    rows = []
    for r in sorted(per_topic.collect(), key=lambda x: (x["cluster"], x["broker"], x["topic"])):
        span_s = (r["last_ms"] - r["first_ms"] + window_ms) / 1000
        lat = latency.get((r["cluster"], r["broker"]))
        rows.append(
            {
                "cluster": r["cluster"],
                "broker": r["broker"],
                "topic": r["topic"],
                "in_msgs": r["in_msgs"],
                "in_mb": r["in_bytes"] / MB,
                "out_msgs": r["out_msgs"],
                "out_mb": r["out_bytes"] / MB,
                "mean_in_msgs_per_s": r["in_msgs"] / span_s,
                "peak_in_msgs_per_s": r["peak_in_msgs_per_s"],
                "mean_in_mb_per_s": r["in_bytes"] / MB / span_s,
                "mean_out_msgs_per_s": r["out_msgs"] / span_s,
                "broker_p50_ms": lat["p50_ms"] if lat else None,
                "broker_p99_ms": lat["p99_ms"] if lat else None,
                "broker_max_ms": lat["max_ms"] if lat else None,
            }
        )
    return rows


def write_summary(
    result: JobResult, rows: list[dict[str, Any]], output: Path, plots: list[Path]
) -> tuple[Path, Path]:
    """``summary.csv``, ``failovers.csv`` and ``summary.md``; returns (csv, md)."""
    csv_path = output / "summary.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    fo_fields = (
        "cluster",
        "broker",
        "broker_id",
        "event_ts",
        "from_role",
        "to_role",
        "master_epoch",
        "gap_start_ms",
        "gap_end_ms",
        "gap_ms",
        "election_ts",
        "controller_id",
    )
    with (output / "failovers.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fo_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(result.failovers)
    md_path = output / "summary.md"
    md_path.write_text(_markdown(result, rows, plots, output), encoding="utf-8")
    return csv_path, md_path


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def _utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _markdown(
    result: JobResult, rows: list[dict[str, Any]], plots: list[Path], output: Path
) -> str:
    lines = [
        "# Throughput report",
        "",
        f"Records read: {result.records:,} broker, {result.controller_records:,} controller; "
        f"corrupt lines skipped: {result.corrupt:,}. Times are UTC.",
        "",
        "## Per cluster, broker and topic",
        "",
        "| " + " | ".join(SUMMARY_FIELDS) + " |",
        "|" + "---|" * len(SUMMARY_FIELDS),
    ]
    lines += ["| " + " | ".join(_fmt(r[k]) for k in SUMMARY_FIELDS) + " |" for r in rows]
    lines += ["", "## Role changes and failovers", ""]
    if not result.failovers:
        lines.append("None.")
    else:
        lines.append(
            "| time | cluster | broker | id | from | to | epoch | put gap start | gap end | gap s |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for f in result.failovers:
            gap = f.get("gap_ms")
            lines.append(
                f"| {_utc(f['event_ts'])} | {f['cluster']} | {f['broker']} | {f['broker_id']} | "
                f"{f['from_role'] or 'boot'} | {f['to_role']} | {_fmt(f['master_epoch'])} | "
                f"{_utc(f.get('gap_start_ms'))} | {_utc(f.get('gap_end_ms'))} | "
                f"{_fmt(gap / 1000 if gap is not None else None)} |"
            )
    if result.elections:
        lines += ["", "Controller elections (successful):", ""]
        lines += [
            f"- {_utc(e['event_ts'])} {e['cluster']}/{e['broker']}: master id "
            f"{e['master_broker_id']}, epoch {e['master_epoch']} (controller {e['controller_id']})"
            for e in result.elections
        ]
    if result.epoch_bumps:
        lines += ["", "Master epoch bumps:", ""]
        lines += [
            f"- {_utc(b['ts'])} {b['cluster']}/{b['broker']} id {b['broker_id']}: "
            f"epoch {b['from_epoch']} -> {b['master_epoch']}"
            for b in result.epoch_bumps
        ]
    lines += ["", "## Plots", ""]
    lines += [f"![{p.stem}]({p.relative_to(output)})" for p in plots]
    return "\n".join(lines) + "\n"
