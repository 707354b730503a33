"""PullRequestHoldService: wake on arrival (filtered by tag), on deadline, not after stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketpy.broker.filter import build_subscription, tags_hash_code
from rocketpy.broker.long_polling import PullRequest, PullRequestHoldService
from rocketpy.common.aio import wait_until
from rocketpy.common.clock import SYSTEM_CLOCK
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Channel, RequestContext


async def test_long_polling_wakes_on_matching_arrival_and_on_deadline(
    make_channel: Callable[[str], Channel],
) -> None:
    """1. Park two pulls on T/0 from offset 5: one for TagA (deadline 10 s), one for '*'
    (deadline 150 ms). 2. A TagB message arrives (max offset 6). 3. A TagA message arrives.
    Expected: the TagB arrival wakes only the '*' pull; the TagA arrival wakes the TagA pull;
    with nothing else arriving a third pull is answered at its deadline; nothing stays parked."""
    woken: list[int] = []
    max_offsets = {("T", 0): 5}

    async def wake(ctx: RequestContext, request: RemotingCommand) -> None:
        woken.append(request.opaque)

    svc = PullRequestHoldService(
        max_offset=lambda t, q: max_offsets[(t, q)], wake_up=wake, check_interval_ms=10_000
    )
    ctx = RequestContext(channel=make_channel("c:1"))
    now = SYSTEM_CLOCK.monotonic_ms()

    def park(opaque: int, tag: str, timeout_ms: int) -> None:
        svc.suspend(
            PullRequest(
                ctx=ctx,
                request=RemotingCommand(code=11, opaque=opaque),
                topic="T",
                queue_id=0,
                pull_from_this_offset=5,
                subscription=build_subscription("T", tag),
                deadline_ms=now + timeout_ms,
            )
        )

    await svc.start()
    try:
        async with asyncio.timeout(5):
            park(1, "TagA", 10_000)
            park(2, "*", 10_000)
            max_offsets[("T", 0)] = 6
            svc.notify_message_arriving("T", 0, 6, tags_hash_code("TagB"))
            await wait_until(lambda: woken == [2], 2)
            svc.notify_message_arriving("T", 0, 7, tags_hash_code("TagA"))
            await wait_until(lambda: woken == [2, 1], 2)
            max_offsets[("T", 0)] = 5
            park(3, "TagA", 150)
            await wait_until(lambda: woken == [2, 1, 3], 2)
            assert len(svc) == 0
            park(4, "*", 10_000)
    finally:
        await svc.stop()
    assert len(svc) == 0
    assert woken == [2, 1, 3]
