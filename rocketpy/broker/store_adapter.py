"""Binds ``rocketpy.store``'s MessageStore (and its IndexService) to the broker's
:class:`~rocketpy.broker.store_api.BrokerStore` calls.

Owns: converting the broker's message and result values to and from the store's, the index
service's life cycle (loaded and registered as a dispatcher before the store re-dispatches), the
long-polling arrival hook (a dispatcher, so it sees each record's tags code), and the queries the
store facade does not offer yet but its consume queues and records answer: search by timestamp,
store time at an offset, earliest store time, topic deletion and runtime figures. Mirrors the
parts of ``DefaultMessageStore`` those calls come from (getOffsetInQueueByTime,
getMessageStoreTimeStamp, getEarliestMessageTime, deleteTopics, queryMessage). Must not: write
records or consume queues itself.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

from rocketpy.broker.config import BrokerConfig, BrokerRole
from rocketpy.broker.request_gate import release_slot_early
from rocketpy.broker.store_api import ArrivalListener, QueryResult, StoredMessage, StoreOffsets
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.message.decoder import decode_record, record_store_timestamp
from rocketpy.common.message.record import (
    INT64,
    PHYSICAL_OFFSET_POS,
    Address,
    MessageRecord,
)
from rocketpy.ha.autoswitch.service import AutoSwitchHAService
from rocketpy.ha.classic.service import DefaultHAService
from rocketpy.ha.config import HAConfig
from rocketpy.ha.state import ReplicaStatus
from rocketpy.store.commit_log.put_types import (
    Appender,
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
)
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.get_types import GetResult
from rocketpy.store.index.index_service import IndexService
from rocketpy.store.index.process import IndexProcess
from rocketpy.store.message_store import MessageStore

log = structlog.get_logger(__name__)

_T = TypeVar("_T")


def stored_message(rec: MessageRecord, size: int) -> StoredMessage:
    """A decoded record as the broker's :class:`StoredMessage`."""
    return StoredMessage(
        topic=rec.topic,
        queue_id=rec.queue_id,
        queue_offset=rec.queue_offset,
        commit_log_offset=rec.physical_offset,
        size=size,
        flag=rec.flag,
        sys_flag=rec.sys_flag,
        born_timestamp=rec.born_timestamp,
        born_host=rec.born_host,
        store_timestamp=rec.store_timestamp,
        store_host=rec.store_host,
        reconsume_times=rec.reconsume_times,
        body=rec.body,
        properties=rec.property_map(),
    )


def total_physical_memory() -> int:
    """``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`` (0 when the platform cannot tell)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def suggest_pulling_from_slave(max_phy_offset: int, pulled_phy_offset: int, limit: int) -> bool:
    """``DefaultMessageStore.getMessage``: the read is "far behind" (likely not in the page
    cache) when the CommitLog end is more than ``limit`` bytes past the last record pulled;
    ``limit`` = physical memory x ``accessMessageInMemoryMaxRatio`` / 100."""
    return max_phy_offset - pulled_phy_offset > limit


class MessageStoreAdapter:
    """A :class:`~rocketpy.broker.service.ManagedStore` over :class:`MessageStore`."""

    def __init__(
        self,
        config: MessageStoreConfig,
        broker: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        ha: HAConfig | None = None,
    ) -> None:
        """Build the store and the index service; nothing is opened until :meth:`start`.

        Args:
            config: the store settings.
            broker: the broker settings that size the index (``maxHashSlotNum``...).
            clock: time source.
            ha: HA settings; None runs without replication (no HA listener). In controller
                mode (``enableControllerMode``) no classic service is built: the broker
                attaches its :class:`AutoSwitchHAService` to :attr:`auto_ha` instead.
        """
        self.config = config
        self._arrival_listeners: list[ArrivalListener] = []
        # A classic slave's log is the master's bytes as they arrived (recover_commit_log's
        # trust_last); in controller mode any broker may be elected master with its log.
        replica = broker.broker_role == BrokerRole.SLAVE and not broker.enable_controller_mode
        self.store = MessageStore(
            config, clock=clock, on_arrival=self._arrived, replica=replica,
            hold_tail=broker.enable_controller_mode,
        )  # fmt: skip
        # A SYNC_FLUSH put always waits for the disk (the commit log's nowait puts refuse it):
        # the send path goes straight to the awaited put, without converting or checking twice.
        self._sync_flush = self.store.commit_log.sync_flush
        # DefaultMessageStore owns its HAService upstream; so does this adapter.
        self.ha: DefaultHAService | None = None
        #: Controller mode: the AutoSwitch service the send path waits on (ha.md 3.8). The
        #: broker owns its life cycle (it is built once the epoch file is open).
        self.auto_ha: AutoSwitchHAService | None = None
        self._bind_address = broker.bind_address
        self._in_memory_limit = (
            total_physical_memory() * broker.access_message_in_memory_max_ratio // 100
        )
        if ha is not None and not broker.enable_controller_mode:
            self.ha = DefaultHAService(
                self.store,
                ha,
                sync_master=broker.broker_role == BrokerRole.SYNC_MASTER,
                auto_in_sync_replicas=broker.enable_acting_master,
                clock=clock,
            )
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="store-index")
        self.index: IndexService | IndexProcess | None = None
        if config.message_index_enable and config.message_index_worker_enable:
            worker = IndexProcess(
                config.root_dir / "index",
                hash_slot_num=broker.max_hash_slot_num,
                index_num=broker.max_index_num,
                max_msgs_num_batch=broker.max_msgs_num_batch,
                # A replaced worker gets what the one that died lost, from the commit log.
                on_restart=lambda: self.store.rewind_dispatch(worker),
            )
            self.index = worker
        elif config.message_index_enable:
            self.index = IndexService(
                config.root_dir / "index",
                hash_slot_num=broker.max_hash_slot_num,
                index_num=broker.max_index_num,
                max_msgs_num_batch=broker.max_msgs_num_batch,
                alloc_executor=self._executor,
                flush_executor=self._executor,
                clock=clock,
            )
        self._started = False

    # -- life cycle ------------------------------------------------------------------------

    def set_store_host(self, host: Address) -> None:
        """``brokerIP1:listenPort``, known once the listener is bound; stored in every record
        and offset message id from now on."""
        self.store.commit_log.store_host = host

    async def start(self) -> None:
        """Lock the store, load the index, then recover the store (its re-dispatch feeds the
        index)."""
        await self.store.lock()
        if self.index is not None:
            # Records the index already holds are skipped on re-dispatch; files are never
            # discarded here (the store's checkpoint is not ours to share).
            if isinstance(self.index, IndexService):
                await self.index.load(last_exit_ok=True)
            await self.index.start()
            self.store.register_dispatcher(self.index)
            # CleanConsumeQueueService also drops index files below the new min offset.
            self.store.clean.min_offset_hooks.append(self.index.delete_expired_files)
        await self.store.start()
        self._started = True
        if self.ha is not None:
            await self.ha.start(self._bind_address)

    async def stop(self) -> None:
        """Flush and close the store (checkpoint, ``abort`` removed), then the index."""
        if not self._started:
            self._executor.shutdown(wait=False)
            return
        self._started = False
        if self.ha is not None:
            await self.ha.stop()
        await self.store.stop()
        if self.index is not None:
            await self.index.stop()
        self._executor.shutdown(wait=False)

    # -- writes ----------------------------------------------------------------------------

    def put_message(self, msg: MessageToStore) -> Coroutine[Any, Any, PutResult]:
        """Append one message; a SYNC_MASTER then waits for its slaves (``handleHA``)."""
        return self._put(self.store.put_message, msg, msg.wait_store)

    def put_batch(self, batch: MessageBatch) -> Coroutine[Any, Any, PutResult]:
        """Append a batch with consecutive queue offsets, then wait as :meth:`put_message`."""
        return self._put(self.store.put_batch, batch, batch.wait_store)

    def put_message_nowait(self, msg: MessageToStore) -> PutResult | None:
        """:meth:`put_message` without awaiting: None (nothing written) when there are replicas
        to wait for or the commit log has to wait (new segment, SYNC_FLUSH)."""
        if self._sync_flush:
            return None  # always waits, in put_message
        return self._put_nowait(msg.wait_store, self.store.put_message_nowait, msg)

    def put_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        """:meth:`put_batch` without awaiting, as :meth:`put_message_nowait`."""
        if self._sync_flush:
            return None
        return self._put_nowait(batch.wait_store, self.store.put_batch_nowait, batch)

    def nowait_appender(self) -> Appender | None:
        """For a run of sends handled at once (the send lane): what :meth:`put_message_nowait`
        does per message once the checks it makes per message are made for the run. None when
        a put would not be made at once now (refused, replicas, SYNC_FLUSH): each send then
        goes alone. The run is synchronous, so what was checked holds until it ends (a SYNC
        master's acceptance depends on the offsets the run appends: it has no lane); the
        caller calls :meth:`appended` once it has."""
        if self._sync_flush or (self.ha is not None and self.ha.sync_master):
            return None
        ha = self.auto_ha if self.auto_ha is not None else self.ha
        if ha is not None and ha.waits_for_replicas(wait_store=True):
            return None  # a send could wait for replicas
        if self._refusal() is not None:
            return None
        return self.store.commit_log.nowait_appender()

    def appended(self) -> None:
        """The run of :meth:`nowait_appender` ended: wake what waits for new records."""
        self.store.commit_log.appended()

    def put_then(
        self, what: MessageToStore | MessageBatch, on_result: Callable[[PutResult], None]
    ) -> PutResult | bool:
        """A put appended now and acknowledged through ``on_result`` (a DLedger send's SEND_OK
        written from the quorum check itself, not a future's callback a loop turn later): the
        refusal, True, or False -- nothing written -- where the put waits otherwise (HA
        replicas, a plain log)."""
        if self.auto_ha is not None or self.ha is not None:
            return False
        refused = self._refusal()
        if refused is not None:
            return PutResult(status=refused)
        return self.store.put_then(what, on_result)

    def _put_nowait(
        self, wait_store: bool, append: Callable[[_T], PutResult | None], stored: _T
    ) -> PutResult | None:
        refused = self._refusal()
        if refused is not None:
            return PutResult(status=refused)
        ha = self.auto_ha if self.auto_ha is not None else self.ha
        if ha is not None and ha.waits_for_replicas(wait_store=wait_store):
            return None
        return append(stored)

    def _refusal(self) -> PutMessageStatus | None:
        """Send path step 1: why a send is refused before anything is stored, or None.

        In controller mode only the master stores sends, and from the moment its HA service
        leaves the master role (upstream's ``checkStoreStatus`` refuses puts once the broker
        role is SLAVE). The broker stops taking sends only after the role change is done, and
        a put in between would be appended without waiting for any replica: answered SEND_OK,
        then cut when this broker truncates to the new master's history (found by the chaos
        test: a paused master resumed with sends queued on its socket).
        """
        if self.auto_ha is not None:
            if not self.auto_ha.is_master:
                return PutMessageStatus.SERVICE_NOT_AVAILABLE
            if not self.auto_ha.can_accept():
                return PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
            return None
        if self.ha is not None and not self.ha.can_accept(self.store.commit_log.max_offset):
            return PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
        return None

    async def _put(
        self,
        append: Callable[[_T, Callable[[], None]], Awaitable[PutResult]],
        stored: _T,
        wait_store: bool,
    ) -> PutResult:
        ha: DefaultHAService | AutoSwitchHAService | None = (
            self.auto_ha if self.auto_ha is not None else self.ha
        )
        refused = self._refusal()
        if refused is not None:
            return PutResult(status=refused)
        # Written, the send slot goes back: a SYNC_FLUSH wait for the disk holds none (else
        # sendMessageThreadPoolNums sends at most would share one fdatasync).
        result = await append(stored, release_slot_early)
        if ha is None or result.status is not PutMessageStatus.PUT_OK:
            return result
        end = result.wrote_offset + result.wrote_bytes
        release_slot_early()  # the append is done; waiting for slaves holds no send slot
        replica = await ha.handle_ha(end, wait_store=wait_store)
        if replica is ReplicaStatus.PUT_OK:
            return result
        return dataclasses.replace(result, status=PutMessageStatus(replica.value))

    # -- reads -----------------------------------------------------------------------------

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
        """Read records from a consume queue."""
        r = self.store.get_message(
            group,
            topic,
            queue_id,
            offset=offset,
            max_count=max_msg_nums,
            max_size=max_total_bytes,
            tags_codes=tags_codes,
        )
        if not r.records:
            return r
        (pulled,) = INT64.unpack_from(r.records[-1], PHYSICAL_OFFSET_POS)
        if not suggest_pulling_from_slave(
            self.store.commit_log.max_offset, pulled, self._in_memory_limit
        ):
            return r
        return dataclasses.replace(r, suggest_pulling_from_slave=True)

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset (0 for an unknown queue)."""
        return self.store.max_offset_in_queue(topic, queue_id)

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First available queue offset."""
        return self.store.min_offset_in_queue(topic, queue_id)

    def message_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """``getMessageStoreTimeStamp``: -1 when there is no record at ``offset``."""
        queue = self.store.queues.get((topic, queue_id))
        if queue is None or not queue.min_offset <= offset < queue.max_offset:
            return -1
        unit = queue.get_unit(offset)
        if unit is None or unit.size <= 0:
            return -1
        raw = self.store.commit_log.mfq.read(unit.commit_log_offset, unit.size)
        return -1 if raw is None else record_store_timestamp(raw)

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """``getEarliestMessageTime``: store time at the min offset, -1 when empty."""
        return self.message_store_time(
            topic, queue_id, self.store.min_offset_in_queue(topic, queue_id)
        )

    def offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp: int, upper: bool
    ) -> int:
        """``getOffsetInQueueByTime`` with 5.x boundary types (client-flows.md section 5):
        LOWER = first offset stored at or after ``timestamp`` (max offset if none); UPPER = last
        offset stored at or before it (0 if none)."""
        queue = self.store.queues.get((topic, queue_id))
        if queue is None:
            return 0
        lo, hi = queue.min_offset, queue.max_offset
        if lo >= hi:
            return hi
        if upper:
            left, right, found = lo, hi - 1, 0
            while left <= right:
                mid = (left + right) // 2
                ts = self.message_store_time(topic, queue_id, mid)
                if 0 <= ts <= timestamp:
                    found, left = mid, mid + 1
                else:
                    right = mid - 1
            return found
        left, right, found = lo, hi - 1, hi
        while left <= right:
            mid = (left + right) // 2
            if self.message_store_time(topic, queue_id, mid) >= timestamp:
                found, right = mid, mid - 1
            else:
                left = mid + 1
        return found

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the record at ``offset`` is readable now (segments are mapped)."""
        return self.message_store_time(topic, queue_id, offset) >= 0

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        """The raw record at a commit-log offset."""
        return self.store.look_message_by_offset(commit_log_offset)

    def look_message_by_offset(self, commit_log_offset: int) -> StoredMessage | None:
        """The decoded record at a commit-log offset."""
        raw = self.store.look_message_by_offset(commit_log_offset)
        return None if raw is None else stored_message(decode_record(raw), len(raw))

    def decode_message(self, record: bytes) -> StoredMessage:
        """Decode one record from :meth:`get_message`."""
        return stored_message(decode_record(record), len(record))

    async def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> QueryResult:
        """``queryMessage`` through the index (empty when the index is disabled).

        Raises:
            StoreError: the index worker is not running or did not answer in time.
        """
        if self.index is None:
            return QueryResult(
                records=(), index_last_update_timestamp=0, index_last_update_phyoffset=0
            )
        if isinstance(self.index, IndexProcess):
            found = await self.index.query_offsets(
                topic, key, max_num, begin_timestamp, end_timestamp
            )
        else:
            found = self.index.query_offsets(topic, key, max_num, begin_timestamp, end_timestamp)
        records = [
            raw
            for raw in (self.store.look_message_by_offset(off) for off in found.phy_offsets)
            if raw is not None
        ]
        return QueryResult(
            records=records,
            index_last_update_timestamp=found.index_last_update_timestamp,
            index_last_update_phyoffset=found.index_last_update_phyoffset,
        )

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Long polling's wake-up hook: (topic, queue id, new max offset, tags code)."""
        self._arrival_listeners.append(listener)

    def _arrived(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        """The reput's hook: a consumable record was dispatched."""
        for listener in self._arrival_listeners:
            listener(topic, queue_id, max_offset, tags_code)

    async def delete_topics(self, topics: set[str]) -> None:
        """``deleteTopics``: forget the topics' queues and delete their files off the loop."""
        gone = await self.store.delete_topics(topics, self.config.consume_queue_dir)
        log.info("delete topics from store", topics=sorted(topics), queues=gone)

    def runtime_info(self) -> Mapping[str, str]:
        """Store figures for GET_BROKER_RUNTIME_INFO."""
        cl = self.store.commit_log
        info = {
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "dispatchBehindBytes": str(self.store.reput.behind()),
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(self._earliest_commit_log_time()),
        }
        try:
            usage = shutil.disk_usage(self.config.commit_log_dir)
        except OSError:
            return info
        info["commitLogDirCapacity"] = f"Total : {usage.total}, Free : {usage.free}."
        info["commitLogDiskRatio"] = f"{usage.used / usage.total:.4f}" if usage.total else "0"
        return info

    def store_offsets(self) -> StoreOffsets:
        """Max, flushed and dispatched commit-log positions (for metrics)."""
        cl = self.store.commit_log
        return StoreOffsets(
            max_phy_offset=cl.max_offset,
            flushed_phy_offset=cl.flushed_offset,
            dispatch_behind_bytes=self.store.reput.behind(),
            min_phy_offset=cl.min_offset,
        )

    def _earliest_commit_log_time(self) -> int:
        """``getEarliestMessageTime``: -1 when the commit log holds no record."""
        raw = self.store.look_message_by_offset(self.store.commit_log.min_offset)
        if raw is None:
            return -1
        try:
            return record_store_timestamp(raw)
        except struct.error:
            return -1
