"""The metrics-dump record layout (schema version 1), pinned by a golden JSON file.

``metrics_dump/record_v1.json`` was produced by the scenario below and reviewed field by field
against analytics/README.md; a change to it is a schema change (bump ``DUMP_VERSION``, update the
README and the analytics job).
"""

from __future__ import annotations

import json
from pathlib import Path

from rocketpy.broker.metrics import (
    DUMP_VERSION,
    BrokerMetrics,
    ConsumerLag,
    NodeIdentity,
    build_dump_record,
)
from rocketpy.broker.store_api import StoreOffsets

GOLDEN = Path(__file__).parent / "metrics_dump" / "record_v1.json"


def _record() -> dict[str, object]:
    m = BrokerMetrics()
    m.record_put("TopicA", 0, 128)
    m.record_put("TopicA", 1, 2048)
    m.record_get("G1", "TopicA", 0, 1, 220)
    m.record_send_latency(0.8)
    m.record_send_latency(12.5)
    m.snapshot(1_700_000_000_000)
    m.record_role_change(1_700_000_005_000, None, "ASYNC_MASTER", None)
    m.record_put("TopicA", 0, 128)
    m.record_send_latency(3.0)
    return build_dump_record(
        ts_ms=1_700_000_010_000,
        boot_ts_ms=1_699_999_990_000,
        node=NodeIdentity(
            cluster="DefaultCluster",
            broker_name="broker-a",
            broker_id=0,
            role="ASYNC_MASTER",
            addr="127.0.0.1:10911",
        ),
        snapshot=m.snapshot(1_700_000_010_000),
        store=StoreOffsets(max_phy_offset=5000, flushed_phy_offset=4000, dispatch_behind_bytes=0),
        consumer_lag=[ConsumerLag(group="G1", topic="TopicA", lag_messages=2)],
    )


def test_metrics_dump_record_matches_golden() -> None:
    """1. Build a record from a fixed scenario (two intervals, two queues, one group).
    Expected: it equals the golden JSON exactly (keys, nesting, values) and carries version 1."""
    record = json.loads(json.dumps(_record()))
    assert record == json.loads(GOLDEN.read_text())
    assert record["version"] == DUMP_VERSION == 1
