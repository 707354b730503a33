"""Fakes with real behaviour for broker unit tests: a channel that records what is written to
it, an in-memory store that follows the store's read rules, and a harness running the
processors over them without sockets."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from rocketpy.broker.client_manager import ConsumerManager, ProducerManager
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.filter import tags_hash_code
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.client_manage import ClientManageProcessor
from rocketpy.broker.processors.consumer_manage import ConsumerManageProcessor
from rocketpy.broker.processors.pull import PullMessageProcessor
from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.rebalance_lock import RebalanceLockManager
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import QueryResult, StoredMessage, StoreOffsets
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.clock import ManualClock
from rocketpy.common.message.decoder import encode_offset_msg_id
from rocketpy.common.message.properties import decode_properties, encode_properties
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext, dispatch
from rocketpy.store.commit_log.put_types import (
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
)
from rocketpy.store.get_types import GetMessageStatus, GetResult
from tests.helpers.broker_client import decode_records

__all__ = ["FakeChannel", "Harness", "MemStore", "decode_records"]


class FakeChannel:
    """A channel with real close state; everything written to it is recorded."""

    def __init__(self, peer: str) -> None:
        self._peer = peer
        self.closed = False
        self.sent: list[RemotingCommand] = []

    @property
    def peer(self) -> str:
        return self._peer

    @property
    def is_closed(self) -> bool:
        return self.closed

    def send_response(self, response: RemotingCommand) -> None:
        if not self.closed:
            self.sent.append(response)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        raise ConnectionError("fake channel does not answer requests")

    def invoke_oneway(self, request: RemotingCommand) -> None:
        if not self.closed:
            self.sent.append(request)

    def close(self) -> None:
        self.closed = True


class MemStore:
    """An in-memory BrokerStore with the read rules of store.md section 10 (no files).

    Records are real commit-log records (``store.commit_log.record``), as pulls return them.
    """

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now = now_ms
        self.queues: dict[tuple[str, int], list[StoredMessage]] = {}
        self.by_offset: dict[int, StoredMessage] = {}
        self.next_phy = 0
        self.listeners: list[Callable[[str, int, int, int], None]] = []
        self.put_status = PutMessageStatus.PUT_OK
        self.store_host: tuple[str, int] = ("127.0.0.1", 10911)

    async def start(self) -> None:
        """Nothing to open."""

    def set_store_host(self, host: tuple[str, int]) -> None:
        """Messages carry their store host."""
        self.store_host = host

    async def stop(self) -> None:
        """Nothing to flush."""

    def decode_records(self, body: bytes) -> list[StoredMessage]:
        """The messages of a pull/query body (records back to back)."""
        return decode_records(body)

    def _append(self, msg: MessageToStore) -> StoredMessage:
        queue = self.queues.setdefault((msg.topic, msg.queue_id), [])
        stored = StoredMessage(
            topic=msg.topic,
            queue_id=msg.queue_id,
            queue_offset=len(queue),
            commit_log_offset=self.next_phy,
            size=100,
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=self._now(),
            store_host=self.store_host,
            reconsume_times=msg.reconsume_times,
            body=msg.body,
            properties=decode_properties(msg.properties),
        )
        stored = dataclasses.replace(stored, size=len(_encode_record(stored)))
        self.next_phy += stored.size
        queue.append(stored)
        self.by_offset[stored.commit_log_offset] = stored
        tags = stored.properties.get("TAGS")
        for listener in self.listeners:
            listener(msg.topic, msg.queue_id, len(queue), tags_hash_code(tags))
        return stored

    async def put_message(self, msg: MessageToStore) -> PutResult:
        if self.put_status != PutMessageStatus.PUT_OK:
            return PutResult(status=self.put_status)
        stored = self._append(msg)
        return PutResult(
            status=PutMessageStatus.PUT_OK,
            wrote_offset=stored.commit_log_offset,
            msg_id=encode_offset_msg_id(stored.store_host, stored.commit_log_offset),
            queue_offset=stored.queue_offset,
            store_timestamp=stored.store_timestamp,
        )

    def put_message_nowait(self, msg: MessageToStore) -> PutResult | None:
        # Always "must wait": the processors' awaiting path (the real store's synchronous one
        # is exercised by the integration tests).
        return None

    def put_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        return None

    def put_then(
        self, what: MessageToStore | MessageBatch, on_result: Callable[[PutResult], None]
    ) -> PutResult | bool:
        # As a plain log: no acknowledgement-pending form.
        return False

    async def put_batch(self, batch: MessageBatch) -> PutResult:
        stored = [
            self._append(
                MessageToStore(
                    topic=batch.topic, queue_id=batch.queue_id, body=body, flag=flag,
                    sys_flag=batch.sys_flag, born_timestamp=batch.born_timestamp,
                    born_host=batch.born_host, reconsume_times=batch.reconsume_times,
                    properties=text,
                )
            )
            for flag, body, text in batch.items
        ]  # fmt: skip
        return PutResult(
            status=PutMessageStatus.PUT_OK,
            wrote_offset=stored[0].commit_log_offset,
            msg_id=",".join(
                encode_offset_msg_id(s.store_host, s.commit_log_offset) for s in stored
            ),
            queue_offset=stored[0].queue_offset,
        )

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_msg_nums: int,
        max_total_bytes: int,
        tags_codes: set[int] | None,
    ) -> GetResult:
        queue = self.queues.get((topic, queue_id))
        high = len(queue) if queue else 0

        def result(
            status: GetMessageStatus, nxt: int, records: tuple[bytes, ...] = ()
        ) -> GetResult:
            return GetResult(
                status=status, next_begin_offset=nxt, min_offset=0, max_offset=high, records=records
            )

        if queue is None:
            return result(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        if high == 0:
            return result(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)
        if offset < 0:
            return result(GetMessageStatus.OFFSET_TOO_SMALL, 0)
        if offset == high:
            return result(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset)
        if offset > high:
            return result(GetMessageStatus.OFFSET_OVERFLOW_BADLY, high)
        found: list[bytes] = []
        nxt = offset
        for msg in queue[offset : offset + max_msg_nums]:
            nxt = msg.queue_offset + 1
            if not tags_codes or tags_hash_code(msg.properties.get("TAGS")) in tags_codes:
                found.append(_encode_record(msg))
        status = GetMessageStatus.FOUND if found else GetMessageStatus.NO_MATCHED_MESSAGE
        return result(status, nxt, tuple(found))

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return len(self.queues.get((topic, queue_id), ()))

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 0

    def offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp: int, upper: bool
    ) -> int:
        queue = self.queues.get((topic, queue_id), [])
        for msg in queue:
            if msg.store_timestamp >= timestamp:
                return msg.queue_offset
        return len(queue)

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get((topic, queue_id))
        return queue[0].store_timestamp if queue else -1

    def message_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        queue = self.queues.get((topic, queue_id), [])
        return queue[offset].store_timestamp if 0 <= offset < len(queue) else -1

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        return 0 <= offset < len(self.queues.get((topic, queue_id), ()))

    def look_message_by_offset(self, commit_log_offset: int) -> StoredMessage | None:
        return self.by_offset.get(commit_log_offset)

    def decode_message(self, record: bytes) -> StoredMessage:
        return decode_records(record)[0]

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        msg = self.by_offset.get(commit_log_offset)
        return None if msg is None else _encode_record(msg)

    async def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> QueryResult:
        hits = [
            _encode_record(m)
            for m in self.by_offset.values()
            if m.topic == topic and key in m.properties.get("KEYS", "").split()
        ]
        return QueryResult(
            records=hits[:max_num], index_last_update_timestamp=0, index_last_update_phyoffset=0
        )

    def add_arrival_listener(self, listener: Callable[[str, int, int, int], None]) -> None:
        self.listeners.append(listener)

    async def delete_topics(self, topics: set[str]) -> None:
        for key in [k for k in self.queues if k[0] in topics]:
            del self.queues[key]

    def runtime_info(self) -> dict[str, str]:
        return {"commitLogMaxOffset": str(self.next_phy)}

    def store_offsets(self) -> StoreOffsets:
        return StoreOffsets(
            max_phy_offset=self.next_phy, flushed_phy_offset=self.next_phy, dispatch_behind_bytes=0
        )


def _encode_record(msg: StoredMessage) -> bytes:
    return encode_record(
        MessageRecord(
            topic=msg.topic,
            body=msg.body,
            queue_id=msg.queue_id,
            flag=msg.flag,
            queue_offset=msg.queue_offset,
            physical_offset=msg.commit_log_offset,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=(msg.born_host[0], msg.born_host[1]),
            store_timestamp=msg.store_timestamp,
            store_host=(msg.store_host[0], msg.store_host[1]),
            reconsume_times=msg.reconsume_times,
            properties=encode_properties(dict(msg.properties)),
        )
    )


class Harness:
    """A broker's processors over :class:`MemStore`, without sockets."""

    def __init__(self, tmp: Path, **config: object) -> None:
        values: dict[str, object] = {
            "brokerName": "broker-a",
            "brokerClusterName": "c1",
            "brokerIP1": "127.0.0.1",
            "listenPort": 0,
        }
        values.update(config)
        cfg = BrokerConfig.build(values)
        self.clock = ManualClock()
        self.store = MemStore(self.clock.wall_ms)
        self.rt = BrokerRuntime(
            config=cfg,
            store=self.store,
            topics=TopicConfigManager(cfg, tmp, clock=self.clock),
            groups=SubscriptionGroupManager(cfg, tmp, clock=self.clock),
            offsets=ConsumerOffsetManager(tmp, clock=self.clock),
            consumers=ConsumerManager(clock=self.clock),
            producers=ProducerManager(clock=self.clock),
            locks=RebalanceLockManager(clock=self.clock),
            clock=self.clock,
            store_host=("127.0.0.1", 10911),
        )
        self.send = SendMessageProcessor(self.rt)
        self.pull = PullMessageProcessor(self.rt)
        self.client = ClientManageProcessor(self.rt)
        self.consumer = ConsumerManageProcessor(self.rt)
        self.channel = FakeChannel("127.0.0.1:50000")
        self.ctx = RequestContext(channel=self.channel)
        self.handlers = {
            **self.send.handlers(),
            **self.pull.handlers(),
            **self.client.handlers(),
            **self.consumer.handlers(),
        }

    async def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand | None:
        """Run one request through the dispatch boundary."""
        registry = ProcessorRegistry()
        for c, p in self.handlers.items():
            registry.register(c, p)
        return await dispatch(registry, self.ctx, RemotingCommand.request(code, ext, body))
