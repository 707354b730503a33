"""A small, unmarked smoke test of the Spark job so ``make test`` covers a little of it (the
full suite is ``make test-spark``). Skipped with the reason when pyspark or Java is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analytics.synth import BrokerState, make_record, role_event


def test_throughput_smoke_rates_and_corrupt_line(spark: Any, tmp_path: Path) -> None:
    """1. Write 20 one-second records of a broker putting 50 msgs/s (boot ROLE_CHANGE in the
    first) and one torn line. 2. compute() with 10 s windows.
    Expected: 20 records, 1 corrupt; both windows show 50 msgs/s in; the boot role change is
    listed without a gap."""
    from analytics.job import compute  # noqa: PLC0415 - needs pyspark

    state = BrokerState("c", "b", 0, "ASYNC_MASTER", 0)
    with (tmp_path / "d.jsonl").open("w") as f:
        for i in range(20):
            events = [role_event(0, None, "ASYNC_MASTER", None)] if i == 0 else []
            rec = make_record(
                state, (i + 1) * 1000 - 1, topics={"T": (50, 5000, 0, 0)}, events=events
            )
            f.write(json.dumps(rec) + "\n")
        f.write("{not json\n")
    result = compute(spark, [str(tmp_path)], 10_000)
    assert (result.records, result.corrupt) == (20, 1)
    rates = sorted(
        (r["window_ms"], r["in_msgs_per_s"]) for r in result.tables["broker_throughput"].collect()
    )
    assert rates == [(0, 50.0), (10_000, 50.0)]
    assert [(f["from_role"], f["to_role"], f.get("gap_ms")) for f in result.failovers] == [
        (None, "ASYNC_MASTER", None)
    ]
