"""Timer messages on a controller-mode broker: it starts fenced (a slave), so the timer store
only runs once the controller's role change makes it master (``controller_setup.py`` starts the
master services)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.integration.broker.test_controller_mode import (  # noqa: F401 - fixtures
    Broker,
    Controller,
    controller_factory,
    ctl_broker,
)

pytestmark = pytest.mark.integration


async def test_timer_runs_after_controller_makes_broker_master(
    controller_factory: Controller,  # noqa: F811
    ctl_broker: Broker,  # noqa: F811
    client: JavaLikeClient,
) -> None:
    """1. A controller and one controller-mode broker (timerPrecisionMs=100); it becomes master
    through the role change. 2. Send a message due in 0.8 s.
    Expected: the timer loops run (started by the role change, not at boot) and the message
    reaches its topic at its time."""
    ctl = await controller_factory()
    broker = await ctl_broker(ctl, "b1", store={"timerPrecisionMs": 100})
    assert not broker.runtime.is_slave
    timer = broker.timer
    assert timer is not None
    at = int(time.time() * 1000) + 800
    resp = await client.send(broker.address, "CtlTimer", b"t", props={"TIMER_DELIVER_MS": str(at)})
    assert resp.code == ResponseCode.SUCCESS
    async with asyncio.timeout(10):
        while True:
            pulled = await client.pull(broker.address, "g", "CtlTimer", 0, expression="*")
            if pulled.code == ResponseCode.SUCCESS and pulled.body:
                break
            await asyncio.sleep(0.02)
    arrived = time.time() * 1000
    assert [m.body for m in decode_records(pulled.body)] == [b"t"]
    assert at - 50 <= arrived <= at + 600
