"""DELETE_TOPIC_IN_BROKER (215) while the broker's reput dispatches the same topic."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from rocketpy.namesrv.service import NamesrvService
from tests.helpers.broker_client import JavaLikeClient
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration


async def test_delete_topic_while_dispatching_it_keeps_the_reput_running(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient
) -> None:
    """1. A broker (100-unit consume-queue segments) with topic Doomed. 2. Send 300 messages
    to Doomed queue 0 one after another while DELETE_TOPIC_IN_BROKER for Doomed is sent five
    times, each after 40 more acknowledged sends (auto-create brings the topic back for the
    next send). 3. Send one message to Other.
    Expected: every send and delete succeeds; the Other message is dispatched (the reput
    dispatches in commit-log order, so it got past every Doomed record); no critical loop
    failed; the broker stops cleanly (fixture)."""
    broker = await broker_factory()
    admin = AdminClient(namesrv.address)
    acked = 0
    try:
        spec = TopicSpec(topic="Doomed", read_queue_nums=1, write_queue_nums=1)
        await admin.create_topic(broker.address, spec)

        async def send_all() -> None:
            nonlocal acked
            for i in range(300):
                resp = await client.send(broker.address, "Doomed", f"m{i}".encode() * 20)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                acked += 1

        async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
            tg.create_task(send_all())
            for n in range(1, 6):
                await wait_until(lambda n=n: acked >= 40 * n, 20)
                await admin.delete_topic_in_broker(broker.address, "Doomed")
        resp = await client.send(broker.address, "Other", b"after")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        await dispatched(broker, "Other", 1)
        assert not broker.failed.is_set()
    finally:
        await admin.close()
