"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ for orderly consumers (client-flows.md section 4.5).

Owns: building the ``LockBatchRequestBody`` and asking the queue's broker; mirrors
``RebalanceImpl.lock``/``lockAll``/``unlock`` minus the process-queue bookkeeping.
"""

from __future__ import annotations

import structlog

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageQueue
from rocketpy.client.pull_api import broker_addr
from rocketpy.common.codes import RequestCode
from rocketpy.common.errors import ClientError, RemotingError
from rocketpy.remoting.protocol.body.broker import (
    LockBatchRequestBody,
    decode_lock_batch_response,
    encode_lock_batch_request,
)

log = structlog.get_logger(__name__)


def _body(client: ClientInstance, group: str, mqs: list[MessageQueue]) -> bytes:
    request = LockBatchRequestBody(
        consumer_group=group, client_id=client.client_id, mq_set=tuple(mqs)
    )
    return encode_lock_batch_request(request)


async def lock_batch(
    client: ClientInstance, group: str, mqs: list[MessageQueue]
) -> set[MessageQueue]:
    """Lock ``mqs`` (all of one broker) for this client; the set actually granted. A failed
    request grants nothing (logged)."""
    if not mqs:
        return set()
    try:
        response = await client.invoke_ok(
            broker_addr(client, mqs[0]), RequestCode.LOCK_BATCH_MQ, None, _body(client, group, mqs)
        )
    except (RemotingError, ClientError) as e:
        log.warning("lockBatchMQ failed", broker=mqs[0].broker_name, error=str(e))
        return set()
    return set(decode_lock_batch_response(response.body))


async def unlock_batch(client: ClientInstance, group: str, mqs: list[MessageQueue]) -> None:
    """Release ``mqs`` (any brokers); failures are logged (the broker lease expires anyway)."""
    by_broker: dict[str, list[MessageQueue]] = {}
    for mq in mqs:
        by_broker.setdefault(mq.broker_name, []).append(mq)
    for group_mqs in by_broker.values():
        try:
            await client.invoke_ok(
                broker_addr(client, group_mqs[0]),
                RequestCode.UNLOCK_BATCH_MQ,
                None,
                _body(client, group, group_mqs),
            )
        except (RemotingError, ClientError) as e:
            log.warning("unlockBatchMQ failed", error=str(e))
