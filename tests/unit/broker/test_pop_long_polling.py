"""PopLongPollingService: parked POPs woken by arrivals on their topic (queue and tag
matching), on the group's pop retry topic, at their deadline, and refused beyond the caps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketpy.broker.filter import build_subscription, tags_hash_code
from rocketpy.broker.pop_long_polling import PopLongPollingService, PopRequest
from rocketpy.common.aio import wait_until
from rocketpy.common.clock import SYSTEM_CLOCK
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Channel, RequestContext


async def test_pop_polling_wakes_by_topic_queue_tag_retry_topic_and_deadline(
    make_channel: Callable[[str], Channel],
) -> None:
    """1. Park: #1 T queue 1 TagA, #2 T all queues '*', #3 T queue 0 '*', #4 (150 ms) T queue 0.
    2. TagB arrives on T/1; then TagA on T/1; then anything on %RETRY%G_T.
    Expected: TagB wakes #2 only; TagA wakes #1; the retry arrival wakes #3; #4 at its deadline;
    POLLING_INFO counts drop to 0."""
    woken: list[int] = []

    async def wake(ctx: RequestContext, request: RemotingCommand) -> None:
        woken.append(request.opaque)

    svc = PopLongPollingService(wake_up=wake, polling_size=10, max_polling_size=100)
    ctx = RequestContext(channel=make_channel("c:1"))
    now = SYSTEM_CLOCK.monotonic_ms()

    def park(opaque: int, queue_id: int, tag: str, timeout_ms: int = 10_000) -> bool | None:
        return svc.polling(
            PopRequest(
                ctx=ctx, request=RemotingCommand(code=200050, opaque=opaque), topic="T",
                group="G", queue_id=queue_id, retry_topic="%RETRY%G_T",
                subscription=build_subscription("T", tag), deadline_ms=now + timeout_ms,
            )
        )  # fmt: skip

    async with asyncio.timeout(5):
        assert park(1, 1, "TagA") is True
        assert park(2, -1, "*") is True
        assert park(3, 0, "*") is True
        assert svc.polling_num("T", "G", -1) == 1
        svc.notify_message_arriving("T", 1, 1, tags_hash_code("TagB"))
        await wait_until(lambda: woken == [2], 2)
        svc.notify_message_arriving("T", 1, 2, tags_hash_code("TagA"))
        await wait_until(lambda: woken == [2, 1], 2)
        svc.notify_message_arriving("%RETRY%G_T", 0, 1, tags_hash_code("TagZ"))
        await wait_until(lambda: woken == [2, 1, 3], 2)
        assert park(4, 0, "*", 150) is True
        await wait_until(lambda: woken == [2, 1, 3, 4], 2)
    assert len(svc) == 0
    assert svc.polling_num("T", "G", 0) == 0
    await svc.stop()


async def test_pop_polling_caps_and_stop(make_channel: Callable[[str], Channel]) -> None:
    """Expected: past popPollingSize per key, or maxPopPollingSize in all, polling answers False
    (POLLING_FULL); a request whose deadline passed is not parked (None); after stop nothing is
    parked and nothing is woken."""
    woken: list[int] = []

    async def wake(ctx: RequestContext, request: RemotingCommand) -> None:
        woken.append(request.opaque)

    svc = PopLongPollingService(wake_up=wake, polling_size=1, max_polling_size=2)
    ctx = RequestContext(channel=make_channel("c:2"))
    now = SYSTEM_CLOCK.monotonic_ms()

    def park(opaque: int, queue_id: int, deadline_ms: int) -> bool | None:
        return svc.polling(
            PopRequest(
                ctx=ctx, request=RemotingCommand(code=200050, opaque=opaque), topic="T",
                group="G", queue_id=queue_id, retry_topic="%RETRY%G_T", subscription=None,
                deadline_ms=deadline_ms,
            )
        )  # fmt: skip

    assert park(1, 0, now + 10_000) is True
    assert park(2, 0, now + 10_000) is False
    assert park(3, 1, now + 10_000) is True
    assert park(4, 2, now + 10_000) is False
    assert park(5, 3, now - 1) is None
    await svc.stop()
    assert len(svc) == 0
    svc.notify_message_arriving("T", 0, 1)
    assert park(6, 0, now + 10_000) is None
    await asyncio.sleep(0.05)
    assert woken == []
