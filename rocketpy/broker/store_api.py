"""What the broker needs from the message store, as a Protocol.

Owns: :class:`BrokerStore` (the calls processors and services make), :class:`StoredMessage` (a
decoded commit-log record with its property map), :class:`QueryResult` and
:class:`StoreOffsets`. Puts and gets cross in the store's own values (one vocabulary, no
conversion): :class:`~rocketpy.store.commit_log.put_types.MessageToStore`, ``MessageBatch``,
``PutResult``/``PutMessageStatus`` and :class:`~rocketpy.store.get_types.GetResult`/
``GetMessageStatus``. Mirrors the subset of upstream's ``MessageStore`` interface the broker
processors call. Must not: implement storage; the store package does (``store_adapter.py``
binds it to this Protocol).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rocketpy.store.commit_log.put_types import (
    Appender,
    MessageBatch,
    MessageToStore,
    PutResult,
)
from rocketpy.store.get_types import GetResult


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A decoded commit-log record (``MessageExt``)."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    body: bytes
    properties: Mapping[str, str]

    def restored(
        self,
        *,
        topic: str,
        queue_id: int,
        properties: dict[str, str],
        reconsume_times: int,
    ) -> MessageToStore:
        """This record stored again under ``topic``/``queue_id`` with ``properties`` (a retry,
        a due delayed message): body, flag, sys flag and born fields carried over."""
        return MessageToStore.with_properties(
            topic=topic,
            queue_id=queue_id,
            body=self.body,
            flag=self.flag,
            properties=properties,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            reconsume_times=reconsume_times,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """``QueryMessageResult``: matching records, newest index entries first."""

    records: Sequence[bytes]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreOffsets:
    """Commit-log positions in bytes (metrics: flush and dispatch lag)."""

    max_phy_offset: int
    flushed_phy_offset: int
    dispatch_behind_bytes: int
    #: First byte still in the commit log (retention deletes below it).
    min_phy_offset: int = 0

    @property
    def flush_behind_bytes(self) -> int:
        """Bytes written but not yet flushed."""
        return max(0, self.max_phy_offset - self.flushed_phy_offset)


#: Called for every dispatched message: (topic, queue id, new max offset, tags code).
ArrivalListener = Callable[[str, int, int, int], None]


class BrokerStore(Protocol):
    """The message-store calls the broker makes."""

    async def put_message(self, msg: MessageToStore) -> PutResult:
        """Append one message (flush/replication wait per config)."""
        ...

    async def put_batch(self, batch: MessageBatch) -> PutResult:
        """Append a batch to one queue with consecutive queue offsets; it waits (flush,
        replicas) as ``batch.wait_store`` says."""
        ...

    def put_message_nowait(self, msg: MessageToStore) -> PutResult | None:
        """:meth:`put_message` when it needs no await (the send hot path): the result, or None
        -- with nothing written -- when the put has to wait (a new segment, a flush or replicas
        to wait for); the caller then awaits :meth:`put_message`."""
        ...

    def nowait_appender(self) -> Appender | None:
        """For a run of sends handled with no await between them (the send lane): what
        :meth:`put_message_nowait` does per message, its per-message checks made once; None
        when a put would not be made at once now. :meth:`appended` follows the run."""
        ...

    def appended(self) -> None:
        """A run of :meth:`nowait_appender`'s appends ended: wake the store's dispatch."""
        ...

    def put_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        """:meth:`put_batch` when it needs no await, as :meth:`put_message_nowait`."""
        ...

    def put_then(
        self, what: MessageToStore | MessageBatch, on_result: Callable[[PutResult], None]
    ) -> PutResult | bool:
        """A put that :meth:`put_message_nowait` left (None) appended now with no coroutine,
        its result handed to ``on_result`` (called once, maybe before this returns) when only
        an acknowledgement is pending (a DLedger quorum): the refusal, True once appended,
        False with nothing written when the caller must await the put."""
        ...

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
        """Read up to ``max_msg_nums`` records from ``offset`` (store.md section 10); with
        ``tags_codes``, only entries whose tags code is in the set."""
        ...

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next offset to be written (0 when the queue does not exist)."""
        ...

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First available offset."""
        ...

    def offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp: int, upper: bool
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (LOWER/UPPER boundary)."""
        ...

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the record at the min offset (-1 when none)."""
        ...

    def message_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the record at ``offset`` (-1 when none)."""
        ...

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the record at ``offset`` is still in the hot window."""
        ...

    def look_message_by_offset(self, commit_log_offset: int) -> StoredMessage | None:
        """Decode the record at a commit-log offset."""
        ...

    def decode_message(self, record: bytes) -> StoredMessage:
        """Decode one stored record (as returned by :meth:`get_message`)."""
        ...

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        """The raw record at a commit-log offset."""
        ...

    async def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> QueryResult:
        """QUERY_MESSAGE through the index."""
        ...

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Register the long-polling wake-up hook."""
        ...

    async def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues (and their files) of deleted topics."""
        ...

    def runtime_info(self) -> Mapping[str, str]:
        """GET_BROKER_RUNTIME_INFO entries the store provides."""
        ...

    def store_offsets(self) -> StoreOffsets:
        """Max, flushed and dispatched commit-log positions (for metrics)."""
        ...
