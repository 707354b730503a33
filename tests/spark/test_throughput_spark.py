"""The PySpark throughput job against generated dumps whose answers are computed here in plain
Python: known rates, a corrupt line, a failover in the middle."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from analytics.histogram import merge_counts, quantile
from analytics.synth import LATENCY_BOUNDS_MS, failover_scenario
from rocketpy.common.codes import ResponseCode
from rocketpy.controller.metrics import (
    ControllerIdentity,
    ControllerMetrics,
    build_controller_dump_record,
)

pytestmark = pytest.mark.spark

START = 1_700_000_000_000
WINDOW = 10_000


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """The failover scenario split over two files (one per broker group), plus a torn line, a
    record of an unknown version and a controller's dumps (two records, one with the election
    of broker-a's id 1 at epoch 2, 100 ms before that broker's role change)."""
    records = failover_scenario(START, intervals=60, interval_ms=1000, fail_at=30, gap=5)
    root = tmp_path_factory.mktemp("dumps")
    (root / "a").mkdir()
    with (root / "a" / "broker-broker-a-0.0000000000.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records if r["node"]["brokerName"] == "broker-a")
        f.write('{"version": 1, "ts": 17000000')  # torn tail
    with (root / "broker-broker-b-0.0000000000.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records if r["node"]["brokerName"] == "broker-b")
        f.write(json.dumps({"version": 99, "ts": START, "node": {"brokerName": "x"}}) + "\n")
    (root / "notes.txt").write_text("not a dump\n")
    metrics = ControllerMetrics()
    node = ControllerIdentity("n0", "group1", "127.0.0.1:9878", "leader", 2, "n0")
    ctl = [build_controller_dump_record(
        ts_ms=START + 30_000, boot_ts_ms=START, node=node, snapshot=metrics.snapshot(START), sets=[]
    )]  # fmt: skip
    metrics.record_election(
        START + 35_400, cluster="c1", broker_name="broker-a", trigger_broker_id=None,
        code=ResponseCode.SUCCESS, master_broker_id=1, master_epoch=2,
    )  # fmt: skip
    ctl.append(build_controller_dump_record(
        ts_ms=START + 40_000, boot_ts_ms=START, node=node,
        snapshot=metrics.snapshot(START + 40_000), sets=[],
    ))  # fmt: skip
    with (root / "controller-group1-n0.0000000000.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in ctl)
    return records, root


@pytest.fixture(scope="module")
def report(spark: Any, scenario: tuple[list[dict[str, Any]], Path], tmp_path_factory: Any) -> Any:
    """One job run over the scenario (10 s windows)."""
    from analytics.throughput import run  # noqa: PLC0415 - needs pyspark

    _, root = scenario
    return run(spark, [str(root)], tmp_path_factory.mktemp("out"), WINDOW)


def _window(ts: int) -> int:
    return ts // WINDOW * WINDOW


def _rows(report: Any, table: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in report.result.tables[table].collect()]


def test_spark_counts_records_and_corrupt_lines(report: Any, scenario: Any) -> None:
    """1. Run the job over 150 good broker records, 2 controller records, a torn line and a
    version-99 record (and a .txt).
    Expected: 150 broker records, 2 controller records, 2 corrupt; the .txt is not read."""
    records, _ = scenario
    assert report.result.records == len(records) == 150
    assert report.result.controller_records == 2
    assert report.result.corrupt == 2


def test_spark_broker_throughput_matches_python(report: Any, scenario: Any) -> None:
    """1. Sum dPutMsgs/dPutBytes/dGetMsgs per broker group and 10 s window in Python.
    Expected: the job's in/out msgs/s and MB/s equal those sums / 10 s, for every window."""
    records, _ = scenario
    expected: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in records:
        acc = expected[(r["node"]["brokerName"], _window(r["ts"]))]
        acc[0] += r["totals"]["dPutMsgs"]
        acc[1] += r["totals"]["dPutBytes"]
        acc[2] += r["totals"]["dGetMsgs"]
    got = {(r["broker"], r["window_ms"]): r for r in _rows(report, "broker_throughput")}
    assert set(got) == set(expected)
    for key, (msgs, nbytes, out) in expected.items():
        assert got[key]["in_msgs_per_s"] == pytest.approx(msgs / 10)
        assert got[key]["in_mb_per_s"] == pytest.approx(nbytes / 10 / 1024 / 1024)
        assert got[key]["out_msgs_per_s"] == pytest.approx(out / 10)
    assert got[("broker-b", _window(START + 20_000))]["in_msgs_per_s"] == 100.0
    topic = {(r["broker"], r["topic"]): r for r in report.summary}
    assert topic[("broker-a", "TopicA")]["in_msgs"] == sum(
        r["totals"]["dPutMsgs"] for r in records if r["node"]["brokerName"] == "broker-a"
    )


def test_spark_latency_percentiles_match_python(report: Any, scenario: Any) -> None:
    """1. Merge each broker group's dCounts per window in Python and take p50/p99 with the
    window's max dMaxMs. Expected: the job's p50_ms/p99_ms/max_ms agree for every window."""
    records, _ = scenario
    hists: dict[tuple[str, int], list[list[int]]] = defaultdict(list)
    maxes: dict[tuple[str, int], float] = defaultdict(float)
    for r in records:
        key = (r["node"]["brokerName"], _window(r["ts"]))
        hists[key].append(r["sendLatency"]["dCounts"])
        maxes[key] = max(maxes[key], r["sendLatency"]["dMaxMs"])
    got = {(r["broker"], r["window_ms"]): r for r in _rows(report, "latency")}
    assert set(got) == set(hists)
    for key, hs in hists.items():
        merged = merge_counts(hs)
        for q, col in ((0.5, "p50_ms"), (0.99, "p99_ms")):
            want = quantile(q, LATENCY_BOUNDS_MS, merged, maxes[key])
            if math.isnan(want):
                assert got[key][col] is None
            else:
                assert got[key][col] == pytest.approx(want), (key, col)
        assert got[key]["max_ms"] == maxes[key]


def test_spark_consumer_and_replication_lag(report: Any, scenario: Any) -> None:
    """1. In Python: the last GA lag of each window, and the slave's lag per window.
    Expected: the job's consumer_lag and replication_lag tables carry the same values, only for
    windows in which the master reported."""
    records, _ = scenario
    lag: dict[int, tuple[int, int]] = {}
    repl: dict[int, int] = {}
    for r in records:
        for item in r["consumerLag"]:
            w = _window(r["ts"])
            if w not in lag or r["ts"] > lag[w][0]:
                lag[w] = (r["ts"], item["lag"])
        for s in r["ha"]["slaves"]:
            repl[_window(r["ts"])] = max(repl.get(_window(r["ts"]), 0), s["lagBytes"])
    got_lag = {r["window_ms"]: r["lag_messages"] for r in _rows(report, "consumer_lag")}
    assert got_lag == {w: v for w, (_, v) in lag.items()}
    got_repl = {r["window_ms"]: r["max_lag_bytes"] for r in _rows(report, "replication_lag")}
    assert got_repl == repl


def test_spark_failover_gap_matches_python(report: Any, scenario: Any) -> None:
    """1. In Python: find the ROLE_CHANGE to master, the last broker-a record with puts at or
    before it and the first after it; gap = (first.ts - first.intervalMs) - last.ts.
    Expected: the job reports exactly one failover with that gap (6 s here) and the epoch bump
    1 -> 2; the markdown summary and the plots exist."""
    records, _ = scenario
    (event,) = [e for r in records for e in r["events"] if e["fromRole"] is not None]
    puts = sorted(
        (r["ts"], r["intervalMs"])
        for r in records
        if r["node"]["brokerName"] == "broker-a" and r["totals"]["dPutMsgs"] > 0
    )
    last = max(ts for ts, _ in puts if ts <= event["ts"])
    first_ts, first_iv = min((ts, iv) for ts, iv in puts if ts > event["ts"])
    want_gap = first_ts - first_iv - last
    (failover,) = [f for f in report.result.failovers if f.get("gap_ms") is not None]
    assert (failover["broker"], failover["broker_id"], failover["to_role"]) == (
        "broker-a",
        1,
        "SYNC_MASTER",
    )
    assert failover["gap_start_ms"] == last
    assert failover["gap_ms"] == want_gap == 6000
    (bump,) = report.result.epoch_bumps
    assert (bump["broker_id"], bump["from_epoch"], bump["master_epoch"]) == (1, 1, 2)
    text = report.summary_md.read_text()
    assert "| broker-a | 1 | SLAVE | SYNC_MASTER | 2 |" in text
    assert "corrupt lines skipped: 2" in text
    assert all(p.stat().st_size > 10_000 for p in report.plots)


def test_spark_parquet_partitioned_by_date_and_broker(report: Any, spark: Any) -> None:
    """1. Read the written broker_throughput Parquet back. Expected: partition directories
    date=2023-11-14/broker=broker-a and broker=broker-b; the same row count as the table."""
    out = report.summary_csv.parent / "parquet" / "broker_throughput"
    assert (out / "date=2023-11-14" / "broker=broker-a").is_dir()
    assert (out / "date=2023-11-14" / "broker=broker-b").is_dir()
    back = spark.read.parquet(str(out))
    assert back.count() == report.result.tables["broker_throughput"].count()


def test_spark_failover_gap_from_window_bounds_alone(
    spark: Any, scenario: Any, tmp_path: Path
) -> None:
    """1. Run the job over the same dumps with 5 s windows: no window now holds puts on both
    sides of the role change (35.5 s; puts stop at 30 s and resume at 37 s), so the gap comes
    from the per-window first/last put times without reading any record again.
    Expected: the same gap as with 10 s windows (start 30 s, end 36 s, 6000 ms)."""
    from analytics.throughput import run  # noqa: PLC0415 - needs pyspark

    _, root = scenario
    result = run(spark, [str(root)], tmp_path, 5000).result
    (failover,) = [f for f in result.failovers if f.get("gap_ms") is not None]
    assert failover["gap_start_ms"] == START + 30_000
    assert failover["gap_end_ms"] == START + 36_000
    assert failover["gap_ms"] == 6000


def test_spark_failover_names_the_controller_election(report: Any, scenario: Any) -> None:
    """1. The scenario's controller dumps hold one successful election: broker-a, id 1, epoch 2,
    at 35.4 s. Expected: the job lists exactly that election; the failover to id 1 (epoch 2)
    carries its time and the controller id n0; the markdown lists it."""
    (election,) = report.result.elections
    assert election == {
        "cluster": "c1",
        "broker": "broker-a",
        "event_ts": START + 35_400,
        "controller_id": "n0",
        "master_broker_id": 1,
        "master_epoch": 2,
    }
    (failover,) = [f for f in report.result.failovers if f.get("gap_ms") is not None]
    assert (failover["election_ts"], failover["controller_id"]) == (START + 35_400, "n0")
    assert "master id 1, epoch 2 (controller n0)" in report.summary_md.read_text()
