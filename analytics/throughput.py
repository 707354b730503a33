"""``python -m analytics.throughput``: the throughput report over rocketpy metrics dumps.

Usage::

    python -m analytics.throughput --input DIR_OR_GLOB [DIR_OR_GLOB ...] --output DIR
        [--master URL] [--window 10s] [--driver-memory 4g]

Runs on an embedded ``local[*]`` Spark by default, on any cluster with ``--master`` (or under
``spark-submit``, which supplies the master). Reads every ``*.jsonl`` file under the inputs with
an explicit schema; lines that are not valid records are counted and reported, never fatal. All
times are UTC. Writes ``DIR/parquet/<table>/date=.../broker=...``, ``DIR/summary.csv``,
``DIR/failovers.csv``, ``DIR/summary.md`` and ``DIR/plots/*.png``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from analytics.job import JobResult, compute
from analytics.plots import plot_all
from analytics.report import summary_rows, write_summary, write_tables

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_window(text: str) -> int:
    """``10s``, ``500ms``, ``1m``, ``1h`` -> milliseconds.

    Raises:
        argparse.ArgumentTypeError: not a positive duration.
    """
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h)\s*", text)
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration like 10s, got {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


@dataclass
class Report:
    """What one run produced."""

    result: JobResult
    summary: list[dict[str, Any]]
    summary_csv: Path
    summary_md: Path
    plots: list[Path]
    seconds: float
    #: Seconds per phase (read = parse, validate and cache; tables = Parquet writes).
    timings: dict[str, float]


def run(spark: SparkSession, inputs: list[str], output: Path, window_ms: int) -> Report:
    """Compute and write everything for ``inputs`` into ``output``."""
    started = mark = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        timings[name] = now - mark
        mark = now

    output.mkdir(parents=True, exist_ok=True)
    result = compute(spark, inputs, window_ms)
    lap("read")
    try:
        write_tables(result, output)
        lap("tables")
        rows = summary_rows(result, window_ms)
        lap("summary")
        plots = plot_all(result, output, window_ms)
        lap("plots")
        csv_path, md_path = write_summary(result, rows, output, plots)
    finally:
        for table in result.cached:
            table.unpersist()
    seconds = time.perf_counter() - started
    return Report(result, rows, csv_path, md_path, plots, seconds, timings)


def session(master: str | None, driver_memory: str = "4g") -> SparkSession:
    """A SparkSession in UTC; ``master`` None keeps what spark-submit set, else ``local[*]``."""
    builder = (
        SparkSession.builder.appName("rocketpy-throughput")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
    )
    if master is not None:
        builder = builder.master(master)
    # else: spark-submit's master, or its default local[*] when run as a plain script
    return builder.getOrCreate()


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m analytics.throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--input", nargs="+", required=True, help="dump directories or globs")
    parser.add_argument("--output", required=True, type=Path, help="report directory")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--window", default="10s", type=parse_window, help="window, e.g. 10s")
    parser.add_argument("--driver-memory", default="4g", help="Spark driver memory (local mode)")
    args = parser.parse_args(argv)
    spark = session(args.master, args.driver_memory)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        report = run(spark, list(args.input), args.output, args.window)
    finally:
        spark.stop()
    res = report.result
    print(f"records: {res.records}  corrupt lines: {res.corrupt}  time: {report.seconds:.1f}s")
    print(f"summary: {report.summary_md}")
    for plot in report.plots:
        print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
