"""A test-side client that speaks to a broker the way the Java 5.x client does.

Encodes SEND_MESSAGE_V2 (single-letter header, ``WAIT``/``UNIQ_KEY``/``TAGS``/``KEYS`` properties),
SEND_BATCH_MESSAGE, PULL_MESSAGE (push-consumer flags), HEART_BEAT (Java HeartbeatData JSON), the
offset requests, CONSUMER_SEND_MSG_BACK and LOCK/UNLOCK_BATCH_MQ (client-flows.md). Requests the
broker sends to the client (NOTIFY_CONSUMER_IDS_CHANGED) are recorded in ``notified``.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Mapping

from rocketpy.broker.store_adapter import stored_message
from rocketpy.broker.store_api import StoredMessage
from rocketpy.common.codes import RequestCode
from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.batch_body import BatchItem, encode_batch_body
from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.properties import encode_properties
from rocketpy.remoting.protocol.body.broker import (
    LockBatchRequestBody,
    MessageQueue,
    decode_lock_batch_response,
    encode_lock_batch_request,
)
from rocketpy.remoting.protocol.body.heartbeat import (
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
    encode_heartbeat,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
_ids = itertools.count(1)


def subscription(topic: str, expression: str = "*", version: int = 1) -> SubscriptionData:
    """``FilterAPI.buildSubscriptionData`` as the client does it."""
    tags = (
        () if expression.strip() in ("", "*") else tuple(t.strip() for t in expression.split("||"))
    )
    return SubscriptionData(
        topic=topic,
        sub_string=expression,
        tags_set=tags,
        code_set=tuple(java_string_hash(t) for t in tags),
        sub_version=version,
    )


class JavaLikeClient:
    """One client instance (one ``clientID``) with its own connections."""

    def __init__(self, client_id: str | None = None, *, producer_group: str = "p1") -> None:
        self.client_id = client_id or f"127.0.0.1@{next(_ids)}#test"
        self.producer_group = producer_group
        self.notified: list[RemotingCommand] = []
        registry = ProcessorRegistry()
        registry.register_default(self._on_request)
        self.remoting = RemotingClient(registry=registry, name=f"client-{self.client_id}")

    async def _on_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.notified.append(request)

    async def close(self) -> None:
        """Close every connection."""
        await self.remoting.close()

    async def call(
        self,
        addr: str,
        code: int,
        ext: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        timeout_s: float = 5.0,
    ) -> RemotingCommand:
        """One request/response."""
        request = RemotingCommand.request(code, dict(ext) if ext is not None else None, body)
        return await self.remoting.invoke(addr, request, timeout_s)

    def send_header(
        self,
        topic: str,
        queue_id: int,
        props: Mapping[str, str],
        *,
        reconsume_times: int = 0,
        max_reconsume_times: int | None = None,
        batch: bool = False,
    ) -> dict[str, str]:
        """The SEND_MESSAGE_V2 extFields Java's producer writes (``a``..``n``)."""
        ext = {
            "a": self.producer_group,
            "b": topic,
            "c": "TBW102",
            "d": "4",
            "e": str(queue_id),
            "f": "0",
            "g": "1700000000000",
            "h": "0",
            "i": encode_properties(dict(props)),
            "j": str(reconsume_times),
            "k": "false",
            "m": "true" if batch else "false",
            "n": "broker-a",
        }
        if max_reconsume_times is not None:
            ext["l"] = str(max_reconsume_times)
        return ext

    async def send(
        self,
        addr: str,
        topic: str,
        body: bytes,
        *,
        queue_id: int = 0,
        tags: str | None = None,
        keys: str | None = None,
        props: Mapping[str, str] | None = None,
        reconsume_times: int = 0,
        max_reconsume_times: int | None = None,
        timeout_s: float = 5.0,
    ) -> RemotingCommand:
        """SEND_MESSAGE_V2 with Java's default properties (``WAIT=true``, a UNIQ_KEY)."""
        all_props = {"UNIQ_KEY": f"UNIQ{next(_ids):028d}", "WAIT": "true"}
        if tags is not None:
            all_props["TAGS"] = tags
        if keys is not None:
            all_props["KEYS"] = keys
        all_props.update(props or {})
        ext = self.send_header(
            topic,
            queue_id,
            all_props,
            reconsume_times=reconsume_times,
            max_reconsume_times=max_reconsume_times,
        )
        return await self.call(addr, RequestCode.SEND_MESSAGE_V2, ext, body, timeout_s=timeout_s)

    async def send_batch(
        self, addr: str, topic: str, entries: list[BatchItem], *, queue_id: int = 0
    ) -> RemotingCommand:
        """SEND_BATCH_MESSAGE."""
        ext = self.send_header(topic, queue_id, {"WAIT": "true"}, batch=True)
        return await self.call(
            addr, RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(entries)
        )

    async def heartbeat(
        self, addr: str, group: str | None = None, subs: tuple[SubscriptionData, ...] = ()
    ) -> RemotingCommand:
        """HEART_BEAT: a push consumer of ``group`` (with the %RETRY% subscription) and the
        producer group."""
        consumers: tuple[ConsumerData, ...] = ()
        if group is not None:
            retry = subscription(f"%RETRY%{group}")
            consumers = (ConsumerData(group_name=group, subscription_data_set=(*subs, retry)),)
        data = HeartbeatData(
            client_id=self.client_id,
            producer_groups=(self.producer_group, "CLIENT_INNER_PRODUCER"),
            consumer_data_set=consumers,
        )
        return await self.call(addr, RequestCode.HEART_BEAT, None, encode_heartbeat(data))

    async def pull(
        self,
        addr: str,
        group: str,
        topic: str,
        offset: int,
        *,
        queue_id: int = 0,
        suspend_ms: int = 0,
        commit_offset: int | None = None,
        expression: str | None = None,
        max_nums: int = 32,
        timeout_s: float = 30.0,
    ) -> RemotingCommand:
        """PULL_MESSAGE like a push consumer (SUSPEND when ``suspend_ms`` > 0, COMMIT_OFFSET when
        ``commit_offset`` is given, SUBSCRIPTION when ``expression`` is given)."""
        flag = 0
        if suspend_ms > 0:
            flag |= FLAG_SUSPEND
        if commit_offset is not None:
            flag |= FLAG_COMMIT_OFFSET
        ext = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": str(flag),
            "commitOffset": str(commit_offset or 0),
            "suspendTimeoutMillis": str(suspend_ms),
            "subVersion": "0",
            "expressionType": "TAG",
            "bname": "broker-a",
        }
        if expression is not None:
            ext["sysFlag"] = str(flag | FLAG_SUBSCRIPTION)
            ext["subscription"] = expression
        return await self.call(addr, RequestCode.PULL_MESSAGE, ext, timeout_s=timeout_s)

    async def lock(
        self, addr: str, group: str, mqs: list[MessageQueue], *, unlock: bool = False
    ) -> tuple[MessageQueue, ...]:
        """LOCK_BATCH_MQ (or UNLOCK_BATCH_MQ)."""
        body = encode_lock_batch_request(
            LockBatchRequestBody(consumer_group=group, client_id=self.client_id, mq_set=tuple(mqs))
        )
        code = RequestCode.UNLOCK_BATCH_MQ if unlock else RequestCode.LOCK_BATCH_MQ
        response = await self.call(addr, code, None, body)
        return () if unlock else decode_lock_batch_response(response.body)


def decode_records(body: bytes) -> list[StoredMessage]:
    """Records back to back (a pull, query or view body), decoded as a client does
    (``MessageDecoder.decodes``)."""
    out: list[StoredMessage] = []
    pos = 0
    while pos < len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        out.append(stored_message(decode_record(body[pos : pos + size]), size))
        pos += size
    return out


__all__ = ["BatchItem", "JavaLikeClient", "decode_records", "subscription"]
