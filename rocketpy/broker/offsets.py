"""ConsumerOffsetManager: committed consumer offsets and ``config/consumerOffset.json``.

Owns: ``"<topic>@<group>" -> queueId -> next offset to consume``, the in-memory pull offsets
(``ConsumeStats.pullOffset``), pending server-side resets, and persistence (the service calls
:meth:`persist` every ``flushConsumerOffsetInterval`` and at stop). Mirrors
``broker/offset/ConsumerOffsetManager`` (5.3.x; store.md section 7, client-flows.md section 4.4):
commits are not checked for monotonicity; ``useServerSideResetOffset`` resets are kept until
the next pull of that queue hands them out, and client commits for a queue with a pending reset
are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor
from pathlib import Path

import structlog

from rocketpy.broker.config_files import ConfigFile, consumer_offset_file
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.remoting.protocol.body.config_shapes import (
    TOPIC_GROUP_SEPARATOR,
    ConsumerOffsetTable,
    DataVersion,
)

log = structlog.get_logger(__name__)


def _key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class ConsumerOffsetManager:
    """Committed offsets of every (group, topic, queue)."""

    def __init__(
        self,
        store_root: Path,
        *,
        executor: Executor | None = None,
        clock: Clock = SYSTEM_CLOCK,
        version_step: int = 500,
    ) -> None:
        """Args: ``store_root`` the ``storePathRootDir``; ``executor`` where file work runs;
        ``clock`` wall clock for the DataVersion; ``version_step`` commits per DataVersion bump
        (``consumerOffsetUpdateVersionStep``)."""
        self._file: ConfigFile[ConsumerOffsetTable] = consumer_offset_file(store_root, executor)
        self._clock = clock
        self._offsets: dict[str, dict[int, int]] = {}
        self._pull_offsets: dict[str, dict[int, int]] = {}
        self._resets: dict[str, dict[int, int]] = {}
        self._data_version = DataVersion(timestamp=clock.wall_ms())
        self._dirty = False
        self._version_step = version_step
        self._version_changes = 0

    async def load(self) -> None:
        """Read ``consumerOffset.json`` (or its ``.bak``).

        Raises:
            StoreError: the file and its backup are both damaged.
        """
        loaded = await self._file.load()
        if loaded is None:
            return
        self._offsets = {k: dict(v) for k, v in loaded.value.offset_table.items()}
        if loaded.value.data_version is not None:
            self._data_version = loaded.value.data_version

    def snapshot(self) -> ConsumerOffsetTable:
        """The table as the file and GET_ALL_CONSUMER_OFFSET carry it."""
        return ConsumerOffsetTable(
            offset_table={k: dict(v) for k, v in self._offsets.items()},
            data_version=self._data_version,
        )

    async def persist(self) -> None:
        """Write ``consumerOffset.json`` (previous content to ``.bak``)."""
        self._dirty = False
        await self._file.persist(self.snapshot())

    async def persist_if_dirty(self) -> None:
        """:meth:`persist` when a commit happened since the last write."""
        if self._dirty:
            await self.persist()

    def merge_from_master(self, table: ConsumerOffsetTable) -> None:
        """Slave metadata sync (``syncConsumerOffset``, 5.x): ``offsetTable.putAll`` of the
        master's table (the master wins for its keys; keys only committed here stay) and the
        master's DataVersion."""
        for key, queues in table.offset_table.items():
            self._offsets[key] = dict(queues)
        if table.data_version is not None:
            self._data_version = table.data_version
        self._dirty = True

    # -- commits and queries

    def commit_offset(self, peer: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """``commitOffset``: store ``offset`` as the next offset to consume (no monotonic check)."""
        key = _key(topic, group)
        if queue_id in self._resets.get(key, {}):
            log.info(
                "[reset-offset] skip commit, offset of this queue was reset in broker",
                group=group,
                topic=topic,
                queue_id=queue_id,
                offset=offset,
                peer=peer,
            )
            return
        self._offsets.setdefault(key, {})[queue_id] = offset
        self._dirty = True
        self._version_changes += 1
        if self._version_changes % self._version_step == 0:
            self.bump_data_version()

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Remember the next offset the group pulls from (``pullOffsetTable``, memory only)."""
        self._pull_offsets.setdefault(_key(topic, group), {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """``queryOffset``: the committed offset, or -1 when none."""
        return self._offsets.get(_key(topic, group), {}).get(queue_id, -1)

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The last pull position, else the committed offset, else -1."""
        pulled = self._pull_offsets.get(_key(topic, group), {}).get(queue_id)
        return pulled if pulled is not None else self.query_offset(group, topic, queue_id)

    def query_offsets(self, group: str, topic: str) -> Mapping[int, int]:
        """``queryOffset(group, topic)``: queue id -> committed offset."""
        return dict(self._offsets.get(_key(topic, group), {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        """``whichTopicByConsumer``: topics the group has offsets for."""
        out: set[str] = set()
        for key in self._offsets:
            topic, _, g = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if g == group:
                out.add(topic)
        return out

    @property
    def offset_table(self) -> Mapping[str, Mapping[int, int]]:
        """A read-only view of ``offsetTable``."""
        return self._offsets

    def remove_group(self, group: str) -> None:
        """``removeOffset(group)``: forget every offset of ``group``."""
        for key in [k for k in self._offsets if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self._offsets[key]
            self._pull_offsets.pop(key, None)
            log.warning("clean group offset", key=key)
        self._dirty = True

    def remove_topic(self, topic: str) -> None:
        """``cleanOffsetByTopic``: forget every group's offsets of ``topic``."""
        for key in [k for k in self._offsets if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self._offsets[key]
            self._pull_offsets.pop(key, None)
        self._dirty = True

    # -- server-side reset (useServerSideResetOffset)

    def assign_reset_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """``assignResetOffset``: set the committed offset now and hand it to the next pull."""
        if not topic or not group or queue_id < 0 or offset < 0:
            log.warning("illegal reset offset", topic=topic, group=group, queue_id=queue_id)
            return
        key = _key(topic, group)
        self._resets.setdefault(key, {})[queue_id] = offset
        self._offsets.setdefault(key, {})[queue_id] = offset
        self._dirty = True

    def has_offset_reset(self, topic: str, group: str, queue_id: int) -> bool:
        """``hasOffsetReset``."""
        return queue_id in self._resets.get(_key(topic, group), {})

    def query_then_erase_reset_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        """``queryThenEraseResetOffset``: the pending reset for this queue, removed."""
        pending = self._resets.get(_key(topic, group))
        if not pending or queue_id not in pending:
            return None
        offset = pending.pop(queue_id)
        if not pending:
            del self._resets[_key(topic, group)]
        return offset

    # -- DataVersion and reverse sync (slave acting master, seed 003)

    @property
    def data_version(self) -> DataVersion:
        """The table's DataVersion (moves every ``version_step`` commits)."""
        return self._data_version

    def bump_data_version(self) -> None:
        """``dataVersion.nextVersion()``."""
        self._data_version = self._data_version.next_version(
            self._clock.wall_ms(), self._data_version.state_version
        )

    def merge_newer(self, table: ConsumerOffsetTable) -> int:
        """Pre-online reverse sync: per queue keep the larger offset (never backwards) and adopt
        ``table``'s DataVersion if it is newer.

        Returns:
            How many queues' offsets were raised.
        """
        raised = 0
        for key, queues in table.offset_table.items():
            mine = self._offsets.setdefault(key, {})
            for queue_id, offset in queues.items():
                if offset > mine.get(queue_id, -1):
                    mine[queue_id] = offset
                    raised += 1
        if table.data_version is not None and self._data_version.compare(table.data_version) < 0:
            self._data_version = table.data_version
        self._dirty = True
        return raised
