"""ReceiveMessage's server stream (``ReceiveMessageResponseStreamWriter``).

Owns: :func:`receive_stream`, the ``grpc.aio`` handler of ReceiveMessage: one ``status`` first,
then one ``message`` per received message, then ``delivery_timestamp`` (now), end (proxy.md
section 2); a refusal is its ``status`` followed by the timestamp. Messages the stream could not
write (the client went away) are nacked: visible again after 1 s
(``processThrowableWhenWriteMessage``). Must not: decide what to receive (that is
``rocketpy/proxy/consume.py``) or import the broker.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import structlog

from rocketpy.proxy.consume import ConsumerActivity, Received
from rocketpy.proxy.messaging import CallContext
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.status import ProxyError, status

log = structlog.get_logger(__name__)

Handler = Callable[[spb.ReceiveMessageRequest, Any], AsyncIterator[spb.ReceiveMessageResponse]]


def _now() -> spb.ReceiveMessageResponse:
    out = spb.ReceiveMessageResponse()
    out.delivery_timestamp.FromMilliseconds(time.time_ns() // 1_000_000)
    return out


def receive_stream(consumer: ConsumerActivity, read_call: Callable[[Any], CallContext]) -> Handler:
    """The ReceiveMessage handler over ``consumer``; ``read_call`` reads a call's metadata
    (raising :class:`ProxyError` for a missing client id)."""

    async def handle(
        request: spb.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        call: CallContext | None = None
        try:
            call = read_call(context)
            received = await consumer.receive_message(request, call)
        except ProxyError as e:
            received = Received(status(e.code, e.message))
        except Exception as e:  # the RPC's boundary: the client gets a status, not a reset
            log.exception("rpc failed", rpc="ReceiveMessage")
            received = Received(status(pb.Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}"))
        sent = 0
        try:
            yield spb.ReceiveMessageResponse(status=received.status)
            for message in received.messages:
                yield spb.ReceiveMessageResponse(message=message)
                sent += 1
            yield _now()
        finally:
            if call is not None and sent < len(received.messages):
                consumer.nack_later(received, received.messages[sent:], call)

    return handle
