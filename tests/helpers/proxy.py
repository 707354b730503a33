"""``bin/mqproxy`` as a process, and a raw gRPC consumer session on our own generated stubs.

:func:`start_proxy` starts the Cluster-mode proxy on a free loopback port (read from its boot
line). :class:`GrpcConsumer` is what a 5.x SimpleConsumer does on the wire (proxy.md section 1.3):
Telemetry Settings with a subscription, then ReceiveMessage streams, AckMessage,
ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue, each with a deadline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.processes import BIN, Daemon

PROXY_BOOT = re.compile(r"rocketmq-proxy startup successfully, grpc address (\S+):(\d+),")
RPC_TIMEOUT_S = 10.0


def start_proxy(tmp: Path, namesrv: str, extra: dict[str, Any] | None = None) -> tuple[Daemon, int]:
    """``bin/mqproxy -n <namesrv> -pc <json>`` on a free loopback port; the daemon and port."""
    conf = tmp / "rmq-proxy.json"
    settings: dict[str, Any] = {
        "grpcServerPort": 0, "bindAddress": "127.0.0.1", "grpcShutdownTimeSeconds": 2,
    }  # fmt: skip
    settings.update(extra or {})
    conf.write_text(json.dumps(settings), encoding="utf-8")
    daemon = Daemon([str(BIN / "mqproxy"), "-n", namesrv, "-pc", str(conf)], tmp / "logs")
    match = daemon.wait_for(PROXY_BOOT)
    return daemon, int(match.group(2))


def seconds(value: float) -> dict[str, int]:
    """A ``Duration`` as keyword arguments."""
    return {"seconds": int(value), "nanos": int((value % 1) * 1e9)}


@dataclass
class Receipt:
    """One ReceiveMessage stream: every response in order, split into its parts."""

    responses: list[spb.ReceiveMessageResponse] = field(default_factory=list)

    @property
    def status(self) -> pb.Status:
        """The stream's status (its first response)."""
        return self.responses[0].status

    @property
    def messages(self) -> list[pb.Message]:
        """The messages, in stream order."""
        return [r.message for r in self.responses if r.WhichOneof("content") == "message"]


class GrpcConsumer:
    """A consumer session of one client id on ``stub``.

    Args:
        stub: the proxy's MessagingService.
        client_id: ``x-mq-client-id``.
        group: consumer group.
        topic: subscribed topic (TAG ``*`` unless ``expression``).

    FIFO and max attempts are not the client's to say: the proxy answers them from the group's
    config (``settings`` holds its answer once :meth:`open` returned).
    """

    def __init__(
        self,
        stub: service_pb2_grpc.MessagingServiceStub,
        client_id: str,
        group: str,
        topic: str,
        *,
        expression: str = "*",
    ) -> None:
        self.stub = stub
        self.meta = (
            ("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"),
            ("x-mq-client-version", "5.1.2"),
        )  # fmt: skip
        self.group = group
        self.topic = topic
        self.expression = expression
        self.settings = pb.Settings()
        self._telemetry: Any = None

    async def open(self) -> pb.Settings:
        """Send the Settings on a Telemetry stream (kept open); the proxy's reply."""
        settings = pb.Settings(
            client_type=pb.ClientType.SIMPLE_CONSUMER,
            request_timeout=seconds(3),
            subscription=pb.Subscription(
                group=pb.Resource(name=self.group),
                subscriptions=[
                    pb.SubscriptionEntry(
                        topic=pb.Resource(name=self.topic),
                        expression=pb.FilterExpression(
                            type=pb.FilterType.TAG, expression=self.expression
                        ),
                    )
                ],
            ),
        )
        self._telemetry = self.stub.Telemetry(metadata=self.meta, timeout=300)
        await self._telemetry.write(spb.TelemetryCommand(settings=settings))
        reply = await self._telemetry.read()
        assert reply.status.code == pb.Code.OK, reply
        self.settings = reply.settings
        return self.settings

    async def close(self) -> None:
        """End the Telemetry stream."""
        if self._telemetry is not None:
            self._telemetry.cancel()

    async def receive(
        self, batch: int = 32, invisible_s: float = 30, poll_s: float = 5, **kw: Any
    ) -> Receipt:
        """One ReceiveMessage; the deadline is the poll time plus 3 s, as the 5.x client's."""
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=self.group),
            message_queue=pb.MessageQueue(
                topic=pb.Resource(name=self.topic), id=-1, broker=pb.Broker(name="broker-a")
            ),
            filter_expression=pb.FilterExpression(
                type=pb.FilterType.TAG, expression=self.expression
            ),
            batch_size=batch,
            invisible_duration=seconds(invisible_s),
            long_polling_timeout=seconds(poll_s),
            **kw,
        )
        out = Receipt()
        async for response in self.stub.ReceiveMessage(req, metadata=self.meta, timeout=poll_s + 3):
            out.responses.append(response)
        return out

    async def receive_until(
        self, count: int, *, invisible_s: float = 30, rounds: int = 10, poll_s: float = 5
    ) -> list[pb.Message]:
        """Receive until ``count`` messages arrived or ``rounds`` receives were made."""
        got: list[pb.Message] = []
        for _ in range(rounds):
            receipt = await self.receive(invisible_s=invisible_s, poll_s=poll_s)
            got.extend(receipt.messages)
            if len(got) >= count:
                break
        return got

    async def ack(self, *handles: tuple[str, str]) -> spb.AckMessageResponse:
        """AckMessage of (message id, receipt handle) entries."""
        req = spb.AckMessageRequest(
            group=pb.Resource(name=self.group),
            topic=pb.Resource(name=self.topic),
            entries=[spb.AckMessageEntry(message_id=m, receipt_handle=h) for m, h in handles],
        )
        response: spb.AckMessageResponse = await self.stub.AckMessage(
            req, metadata=self.meta, timeout=RPC_TIMEOUT_S
        )
        return response

    async def ack_messages(self, messages: list[pb.Message]) -> spb.AckMessageResponse:
        """AckMessage of received messages."""
        return await self.ack(
            *(
                (m.system_properties.message_id, m.system_properties.receipt_handle)
                for m in messages
            )
        )

    async def change(
        self, message_id: str, handle: str, invisible_s: float
    ) -> spb.ChangeInvisibleDurationResponse:
        """ChangeInvisibleDuration."""
        req = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=self.group), topic=pb.Resource(name=self.topic),
            receipt_handle=handle, invisible_duration=seconds(invisible_s), message_id=message_id,
        )  # fmt: skip
        response: spb.ChangeInvisibleDurationResponse = await self.stub.ChangeInvisibleDuration(
            req, metadata=self.meta, timeout=RPC_TIMEOUT_S
        )
        return response

    async def forward_to_dlq(self, msg: pb.Message) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """ForwardMessageToDeadLetterQueue of a received message."""
        req = spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=self.group), topic=pb.Resource(name=self.topic),
            receipt_handle=msg.system_properties.receipt_handle,
            message_id=msg.system_properties.message_id,
            delivery_attempt=msg.system_properties.delivery_attempt, max_delivery_attempts=16,
        )  # fmt: skip
        response: spb.ForwardMessageToDeadLetterQueueResponse = (
            await self.stub.ForwardMessageToDeadLetterQueue(
                req, metadata=self.meta, timeout=RPC_TIMEOUT_S
            )
        )
        return response


def proxy_channel(port: int) -> grpc.aio.Channel:
    """An insecure channel to the proxy on loopback."""
    return grpc.aio.insecure_channel(f"127.0.0.1:{port}")
