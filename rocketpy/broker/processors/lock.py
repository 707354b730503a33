"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) for orderly consumers.

Owns: decoding the batch bodies and answering ``lockOKMQSet``. Mirrors
``AdminBrokerProcessor.lockBatchMQ``/``unlockBatchMQ`` (client-flows.md section 4.5). With
``lockInStrictMode`` (and a known member group: ``enableSlaveActingMaster``) a request that is not
``onlyThisBroker`` locks a queue only when ``totalReplicas // 2 + 1`` members of the set, this one
included, lock it: the queues locked here are sent on to every other live member with
``onlyThisBroker=true`` and counted. Unlock stays local, as upstream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.broker import (
    decode_lock_batch_request,
    encode_lock_batch_response,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Processor, RequestContext


class LockProcessor:
    """Queue lock requests."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
        }

    async def lock_batch(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``lockBatchMQ``: lock or renew each queue not held by another live client."""
        body = decode_lock_batch_request(request.body)
        locked = self._rt.locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        quorum = self._rt.total_replicas // 2 + 1
        ask = self._rt.lock_on_replicas
        strict = self._rt.config.lock_in_strict_mode and not body.only_this_broker
        if strict and ask is not None and quorum > 1:
            votes = Counter(locked)
            mine = replace(body, mq_set=tuple(locked), only_this_broker=True)
            for theirs in await ask(mine):
                votes.update(set(theirs) & set(locked))
            locked = [mq for mq in locked if votes[mq] >= quorum]
        return request.make_response(ResponseCode.SUCCESS, body=encode_lock_batch_response(locked))

    async def unlock_batch(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``unlockBatchMQ``."""
        body = decode_lock_batch_request(request.body)
        self._rt.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(ResponseCode.SUCCESS)
