"""The broker's message store in DLedger CommitLog mode (``enableDLegerCommitLog=true``;
dledger-commitlog.md sections 1.4, 1.5 and 4).

Owns: :class:`DLedgerMessageStore`, the :class:`MessageStore` whose CommitLog is
:class:`~rocketpy.broker.dledger_commitlog.DLedgerCommitLog` and whose reput is
:class:`~rocketpy.broker.dledger_commitlog.DLedgerReput` (consume queues built from committed
entries only, on leader and followers alike), with the recovery of the RocketMQ layer over the
DLedger log (section 1.5) and the follow-up of the member's retention (section 1.6: consume
queues, index and disk-full flag follow deleted data files); :class:`DLedgerStoreAdapter`, the
broker's store adapter that owns the :class:`DLedgerMember` (started before the store, shut
down after it); and
:func:`member_config`, the broker keys mapped onto the member's settings. Mirrors the DLedger
branches of ``DefaultMessageStore`` (``recover``, the reput over ``DLedgerCommitLog``) and of
``BrokerController.initialize``. Must not: decide the broker's role (``dledger_roles.py``), or
touch the normal store path (chosen only by ``default_store_factory`` when the key is set).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_commitlog import DLedgerCommitLog, DLedgerReput
from rocketpy.broker.store_adapter import MessageStoreAdapter
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.message.record import Address
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.member import DLedgerMember
from rocketpy.store.checkpoint import StoreCheckpoint
from rocketpy.store.cleanup import DiskUsage, correct_min_offset, disk_used_ratio
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.reput import ArrivalHook, scan_record
from rocketpy.store.dledger_log.entry import BODY_OFFSET, check_entry_size
from rocketpy.store.message_store import MessageStore

log = structlog.get_logger(__name__)


def member_config(store: MessageStoreConfig, broker: BrokerConfig) -> DLedgerMemberConfig:
    """The member's settings from the broker's keys (``BrokerController`` builds its
    ``DLedgerConfig`` the same way): the group defaults to ``brokerName``, the files live under
    ``storePathRootDir/dledger-<selfId>``, data files are ``mappedFileSizeCommitLog`` long and
    ``storePathDLedgerCommitLog`` (its first path) moves them; retention keeps files
    ``fileReservedTime + 1`` hours, deletes in the ``deleteWhen`` hours or over
    ``diskMaxUsedSpaceRatio``, and at any age over DLedger's force-clean ratio only with
    ``cleanFileForciblyEnable``.

    Raises:
        ValueError: ``dLegerPeers`` is malformed or does not name ``dLegerSelfId``.
    """
    data_dir = None
    if store.store_path_dledger_commit_log:
        data_dir = Path(store.store_path_dledger_commit_log.split(",")[0].strip())
    return DLedgerMemberConfig(
        group=store.dleger_group or broker.broker_name,
        self_id=store.dleger_self_id or "",
        peers=store.dleger_peers or "",
        store_base_dir=store.root_dir,
        preferred_leader_ids=store.preferred_leader_id,
        enable_batch_push=store.enable_batch_push,
        data_file_size=store.mapped_file_size_commit_log,
        data_dir=data_dir,
        # DLedgerCommitLog's constructor: retention follows the broker's keys.
        file_reserved_hours=store.file_reserved_time + 1,
        delete_when=store.delete_when,
        disk_space_ratio_to_check_expired=store.disk_max_used_space_ratio / 100,
        enable_disk_force_clean=store.clean_file_forcibly_enable,
    )


class DLedgerMessageStore(MessageStore):
    """CommitLog = the DLedger member's log; reput bounded by its committed position."""

    def __init__(
        self,
        config: MessageStoreConfig,
        member: DLedgerMember,
        *,
        store_host: Address = ("127.0.0.1", 10911),
        clock: Clock | None = None,
        on_arrival: ArrivalHook | None = None,
        disk_usage: DiskUsage = disk_used_ratio,
    ) -> None:
        self.member = member
        super().__init__(
            config, store_host=store_host, clock=clock, on_arrival=on_arrival, disk_usage=disk_usage
        )
        # The DLedger files are the member's to delete (its clean-space pass; upstream's
        # DLedgerCommitLog.deleteExpiredFile deletes nothing without an old commitlog): this
        # store's clean pass only watches the disk and follows the new min offset with the
        # consume queues and the index. The member never deletes what is not dispatched yet.
        self.clean.floor = lambda: 0
        member.clean.keep_from = lambda: self.reput.reput_from
        member.clean.add_deleted_listener(self._dledger_files_deleted)
        # A follower's committed position moves with the leader's pushes, a leader's with
        # the quorum's acks: either way the reput has new committed entries to dispatch.
        member.add_committed_listener(lambda _index, _pos: self.reput.wake())

    async def _dledger_files_deleted(self, min_offset: int) -> None:
        """The member deleted head data files: consume queues and index follow the new min
        offset (``CleanConsumeQueueService``), and the disk is measured again so the disk-full
        flag clears as soon as there is room."""
        log.info("dledger data files deleted", min_offset=min_offset,
                 ledger_begin_index=self.member.store.ledger_begin_index)  # fmt: skip
        await self.clean.clean_consume_queues()
        await self.clean.check_disk()

    def _new_commit_log(self, store_host: Address) -> DLedgerCommitLog:
        return DLedgerCommitLog(
            self.config,
            self.member,
            store_host=store_host,
            clock=self.clock,
            flush_executor=self._flush_executor,
            alloc_executor=self._alloc_executor,
            on_append=self._wake_reput,
        )

    def _new_reput(self, on_arrival: ArrivalHook | None) -> DLedgerReput:
        return DLedgerReput(
            self.commit_log.mfq,
            self.commit_log.confirm_offset,
            on_arrival=on_arrival,
            hints=self.commit_log.dispatch_hints,
            put_run=self._put_cq_run,
        )

    def _load_and_recover(self) -> None:
        """Section 1.5, RocketMQ layer (the member has recovered the DLedger log already):
        consume queues are cut above the committed position; the reput resumes at the queues'
        max physical end after a clean stop, after a crash at the newest data file whose first
        message is older than the checkpoint (re-dispatching skips units already there)."""
        root = self.config.root_dir
        root.mkdir(parents=True, exist_ok=True)
        self._abnormal = self.config.abort_path.exists()
        self.checkpoint = StoreCheckpoint.open(self.config.checkpoint_path)
        cq_root = self.config.consume_queue_dir
        if cq_root.is_dir():
            for topic_dir in sorted(cq_root.iterdir()):
                for qdir in sorted(topic_dir.iterdir()):
                    if qdir.name.lstrip("-").isdigit():
                        self._new_queue(topic_dir.name, int(qdir.name)).recover()
        committed = self.commit_log.max_offset
        for q in self.queues.values():
            q.truncate_by_commit_log(committed)
            # Retention may have deleted data files below units the queue still has.
            correct_min_offset(q, self.commit_log.min_offset)
        start = self.commit_log.min_offset
        if self._abnormal:
            start = self._crash_restart_from(self.checkpoint.min_timestamp())
        else:
            start = max([q.max_physic_offset for q in self.queues.values()] + [start])
        self.recovery = None
        self.reput.reput_from = start
        log.info("dledger store recovered", abnormal=self._abnormal, committed=committed,
                 reput_from=start)  # fmt: skip

    def _crash_restart_from(self, checkpoint_ms: int) -> int:
        """The start of the newest data file whose first record was stored at or before
        ``checkpoint_ms`` (everything dispatched before it is in durable consume queues);
        the first file when none is."""
        files = self.commit_log.mfq.files
        for mf in reversed(files):
            size = check_entry_size(mf.buffer, 0)
            if size <= BODY_OFFSET:
                continue
            view = mf.view(BODY_OFFSET, size - BODY_OFFSET)
            try:
                req, _ = scan_record(view, mf.file_from_offset + BODY_OFFSET, check_crc=False)
            finally:
                view.release()
            if req is not None and req.store_timestamp <= checkpoint_ms:
                return mf.file_from_offset
        return files[0].file_from_offset if files else 0

    async def stop(self) -> None:
        """Stop the member's clean-space pass first (its deletion listener uses this store's
        queues and executors), then as the base. Idempotent."""
        await self.member.clean.stop()
        await super().stop()

    def _close_files(self) -> None:
        """As the base, but the data files are the member's: it closes them."""
        for q in self.queues.values():
            q.flush()
            q.close()
        if self.checkpoint is not None:
            now = self.clock.wall_ms()
            self.checkpoint.physic_msg_timestamp = now
            self.checkpoint.logics_msg_timestamp = now
            self.checkpoint.close()
        if self.reput.reput_from >= self.commit_log.max_offset:
            self.config.abort_path.unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.release()


class DLedgerStoreAdapter(MessageStoreAdapter):
    """The broker's store in DLedger CommitLog mode, owning its :class:`DLedgerMember`."""

    def __init__(
        self,
        config: MessageStoreConfig,
        broker: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(config, broker, clock=clock, ha=None)
        self.member = DLedgerMember(member_config(config, broker), clock=clock)
        self.store = DLedgerMessageStore(config, self.member, clock=clock, on_arrival=self._arrived)
        self._sync_flush = False

    async def start(self) -> None:
        """Lock the store, start the member (recovers the DLedger log, binds the peer port,
        joins elections), then recover and start the RocketMQ layer over it."""
        await self.store.lock()
        try:
            await self.member.start()
            await super().start()
        except BaseException:
            await self.member.shutdown()
            await self.store.stop()  # a store that did not start only gives its lock back
            raise

    async def stop(self) -> None:
        """Stop the RocketMQ layer (last dispatch, checkpoint), then the member."""
        try:
            await super().stop()
        finally:
            await asyncio.shield(self.member.shutdown())
