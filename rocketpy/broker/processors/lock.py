"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) for orderly consumers.

Owns: decoding the batch bodies and answering ``lockOKMQSet``. Mirrors
``AdminBrokerProcessor.lockBatchMQ``/``unlockBatchMQ`` without ``lockInStrictMode`` (locks are
this broker's only; client-flows.md section 4.5).
"""

from __future__ import annotations

from collections.abc import Mapping

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
        return request.make_response(ResponseCode.SUCCESS, body=encode_lock_batch_response(locked))

    async def unlock_batch(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``unlockBatchMQ``."""
        body = decode_lock_batch_request(request.body)
        self._rt.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(ResponseCode.SUCCESS)
