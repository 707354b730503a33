"""lockInStrictMode: LOCK_BATCH_MQ on a master locks a queue only when a quorum of the broker
set locks it (``AdminBrokerProcessor.lockBatchMQ`` with ``lockBatchMQAsync``; issue 8)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.broker import (
    LockBatchRequestBody,
    MessageQueue,
    decode_lock_batch_response,
    encode_lock_batch_request,
)
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.classic_chaos import MASTER_A, NAMESRV_KEYS, SLAVE_A
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process
STRICT = "lockInStrictMode=true\n"
GROUP = "strict-g"


def _mq(queue_id: int) -> MessageQueue:
    return MessageQueue(topic="StrictT", broker_name="broker-a", queue_id=queue_id)


async def _scenario(master: str, slave: str) -> None:
    a, b = JavaLikeClient(), JavaLikeClient()
    try:
        # client B holds queue 0 on the slave only
        body = LockBatchRequestBody(
            consumer_group=GROUP, client_id=b.client_id, mq_set=(_mq(0),), only_this_broker=True
        )
        resp = await b.call(slave, RequestCode.LOCK_BATCH_MQ, None, encode_lock_batch_request(body))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert decode_lock_batch_response(resp.body) == (_mq(0),)
        # client A gets queue 1 once the master knows its member group (slave and master agree)
        async with asyncio.timeout(15):
            while await a.lock(master, GROUP, [_mq(1)]) != (_mq(1),):
                await asyncio.sleep(0.1)
        # queue 0: the master alone would grant it, the slave refuses, 1 of 2 is no quorum
        assert await a.lock(master, GROUP, [_mq(0), _mq(1)]) == (_mq(1),)
    finally:
        await a.close()
        await b.close()


def test_lock_strict_mode_needs_a_quorum_of_the_set(tmp_path: Path) -> None:
    """1. mqnamesrv (supportActingMaster); broker-a's master and slave with
    enableSlaveActingMaster, totalReplicas=2 and lockInStrictMode=true.
    2. Client B locks queue 0 on the slave only (onlyThisBroker=true).
    3. Client A locks queue 1 on the master until granted, then queues 0 and 1.
    Expected: queue 1 is granted (master and slave lock it: 2 of 2); queue 0 is refused although
    the master itself holds no lock on it, because the slave refuses it (1 of 2 < quorum 2)."""
    namesrv, ns = start_namesrv(tmp_path, NAMESRV_KEYS)
    daemons: list[Daemon] = []
    try:
        m, master = start_broker(tmp_path, ns, extra=MASTER_A + STRICT, tag="m")
        daemons.append(m)
        s, slave = start_broker(tmp_path, ns, extra=SLAVE_A + STRICT, tag="s")
        daemons.append(s)
        asyncio.run(_scenario(master, slave))
    finally:
        for d in reversed(daemons):
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
