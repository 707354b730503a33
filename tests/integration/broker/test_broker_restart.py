"""Restart on the same store: nothing acknowledged is lost, offsets and metadata resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records, subscription
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration


async def test_broker_restart_keeps_messages_offsets_and_metadata(
    broker_factory: BrokerFactory, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. Send 300 messages (~100 KB, so the 64 KiB commit log rolls) to T queue 0 and 3 to
    T2; consumer g commits offset 120 on T (oneway-style update) and creates a group config.
    2. Stop the broker cleanly. 3. Start a new broker on the same store root.
    Expected: every acknowledged message is readable in order with its body; GET_MAX_OFFSET is
    300; QUERY_CONSUMER_OFFSET returns 120; T, T2, %RETRY%g and group g's retryMaxTimes survive;
    new sends continue at queue offset 300."""
    root = tmp_path / "store-a"
    broker = await broker_factory(store_root=root)
    addr = broker.address
    acked: list[bytes] = []
    for i in range(300):
        body = f"message-{i:04d}-".encode() + b"x" * 300
        resp = await client.send(addr, "T", body)
        assert resp.code == ResponseCode.SUCCESS
        acked.append(body)
    for i in range(3):
        await client.send(addr, "T2", f"t2-{i}".encode())
    await client.heartbeat(addr, "g", (subscription("T"),))
    group = b'{"groupName":"g","retryMaxTimes":3}'
    assert (
        await client.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, group)
    ).code == 0
    update = {"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "120"}
    assert (await client.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
    await dispatched(broker, "T", 300)
    async with asyncio.timeout(10):
        await broker.stop()
    await client.close()

    again = await broker_factory(store_root=root)
    reader = JavaLikeClient()
    try:
        addr = again.address
        qid = {"topic": "T", "queueId": "0"}
        assert (await reader.call(addr, RequestCode.GET_MAX_OFFSET, qid)).ext("offset") == "300"
        query = {"consumerGroup": "g", "topic": "T", "queueId": "0"}
        assert (await reader.call(addr, RequestCode.QUERY_CONSUMER_OFFSET, query)).ext(
            "offset"
        ) == "120"
        got: list[bytes] = []
        offset = 0
        while offset < 300:
            resp = await reader.pull(addr, "g2", "T", offset, expression="*")
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert resp.body is not None
            got.extend(m.body for m in decode_records(resp.body))
            offset = int(resp.ext("nextBeginOffset") or "0")
        assert got == acked
        for topic in ("T", "T2", "%RETRY%g"):
            assert again.topics.select(topic) is not None, topic
        group_config = again.groups.get("g")
        assert group_config is not None
        assert group_config.retry_max_times == 3
        resp = await reader.send(addr, "T", b"after-restart")
        assert (resp.code, resp.ext("queueOffset")) == (ResponseCode.SUCCESS, "300")
    finally:
        await reader.close()
