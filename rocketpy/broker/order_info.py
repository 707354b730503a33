"""ConsumerOrderInfoManager: the orderly-POP state per (topic, group, queue), persisted in
``config/consumerOrderInfo.json``.

Owns: per queue the offsets of the last popped batch, its pop time, invisible time and attempt
id, per offset its next visible time and consume count, and which offsets are acked
(``commitOffsetBit``). A queue blocks while any un-acked offset of its batch is still invisible
(the same ``attemptId`` is let through and gets the same messages again); an ack commits the
queue offset only up to the first un-acked offset of the batch; a re-pop of offsets seen before
by another attempt raises their count (kept only when non-zero, ``mergeOffsetConsumedCount``).
Mirrors ``broker/offset/ConsumerOrderInfoManager`` and its ``OrderInfo`` (5.3.x, proxy.md section
3.4); the file keeps upstream's JSON field names (``popTime``, ``i``, ``o`` -- first offset then
differences --, ``ot``, ``oc``, ``l``, ``cm``, ``a``).
Must not: read the store or commit consumer offsets (the processors do).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from rocketpy.broker.config_files import CONFIG_DIR, ConfigFile
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, dumps, loads

log = structlog.get_logger(__name__)


@dataclass(slots=True, kw_only=True)
class OrderInfo:
    """``OrderInfo`` of one queue (offsets absolute here; diffs only in the file)."""

    pop_time: int
    invisible_time: int
    offsets: list[int]
    next_visible: dict[int, int] = field(default_factory=dict)
    consumed_count: dict[int, int] = field(default_factory=dict)
    last_consume_timestamp: int = 0
    commit_bits: int = 0
    attempt_id: str | None = None

    def acked(self, index: int) -> bool:
        """Bit ``index`` of ``commitOffsetBit``."""
        return bool(self.commit_bits >> index & 1)

    def need_block(self, invisible_time: int, now: int) -> bool:
        """``needBlock``: an un-acked offset of the batch is still invisible."""
        for i, offset in enumerate(self.offsets):
            if self.acked(i):
                continue
            if self.next_visible.get(offset, self.pop_time + self.invisible_time) > now:
                return True
        return False

    def to_bean(self) -> Bean:
        """Upstream's JSON shape."""
        first = self.offsets[0] if self.offsets else 0
        return Bean(
            popTime=self.pop_time,
            i=self.invisible_time,
            o=[first] + [o - first for o in self.offsets[1:]] if self.offsets else [],
            ot=dict(self.next_visible),
            oc=dict(self.consumed_count),
            l=self.last_consume_timestamp,
            cm=self.commit_bits,
            a=self.attempt_id,
        )

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> OrderInfo:
        """Parse upstream's JSON shape."""
        raw = [int(o) for o in obj.get("o") or []]
        offsets = [raw[0]] + [raw[0] + d for d in raw[1:]] if raw else []
        return cls(
            pop_time=int(obj.get("popTime", 0)),
            invisible_time=int(obj.get("i") or 0),
            offsets=offsets,
            next_visible={int(k): int(v) for k, v in (obj.get("ot") or {}).items()},
            consumed_count={int(k): int(v) for k, v in (obj.get("oc") or {}).items()},
            last_consume_timestamp=int(obj.get("l", 0)),
            commit_bits=int(obj.get("cm", 0)),
            attempt_id=obj.get("a"),
        )


Table = dict[str, dict[int, OrderInfo]]


def encode_table(table: Table) -> str:
    """``consumerOrderInfo.json`` text."""
    return dumps(
        Bean(table={key: {q: info.to_bean() for q, info in queues.items()} for key, queues in
                    table.items()})
    )  # fmt: skip


def decode_table(raw: bytes) -> Table:
    """Parse ``consumerOrderInfo.json``.

    Raises:
        CodecError: not the expected shape.
    """
    obj = loads(raw)
    try:
        return {
            str(key): {int(q): OrderInfo.from_json(info) for q, info in queues.items()}
            for key, queues in (obj.get("table") or {}).items()
        }
    except (AttributeError, TypeError, ValueError, IndexError) as e:
        raise CodecError(f"consumerOrderInfo.json: {e!r}", field="table") from e


class ConsumerOrderInfoManager:
    """The orderly-POP table."""

    def __init__(
        self, store_root: Path, *, executor: Executor | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Args: ``store_root`` holds ``config/consumerOrderInfo.json``; ``executor`` for the
        file; ``clock`` wall time."""
        self._file: ConfigFile[Table] = ConfigFile(
            store_root / CONFIG_DIR / "consumerOrderInfo.json",
            encode=encode_table,
            decode=decode_table,
            executor=executor,
        )
        self._clock = clock
        self._table: Table = {}
        self._dirty = False

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        """The queue's order info."""
        return self._table.get(f"{topic}@{group}", {}).get(queue_id)

    async def load(self) -> None:
        """Read the file (or its ``.bak``)."""
        loaded = await self._file.load()
        if loaded is not None:
            self._table = loaded.value

    async def persist(self) -> None:
        """Write the file."""
        self._dirty = False
        await self._file.persist(self._table)

    async def persist_if_dirty(self) -> None:
        """Write the file if something changed."""
        if self._dirty:
            await self.persist()

    def check_block(  # noqa: PLR0917 - upstream's signature
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        invisible_time: int,
        now: int,
    ) -> bool:
        """``checkBlock``: True when the queue must yield nothing to this pop."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return False
        if attempt_id and attempt_id == info.attempt_id:
            return False
        return info.need_block(invisible_time, now)

    def update(  # noqa: PLR0917 - upstream's signature
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
    ) -> dict[int, int]:
        """``update``: a new batch was popped. Returns the non-zero consume counts by offset
        (an offset popped before by another attempt counts once more; the same attempt keeps
        the previous counts)."""
        old = self.get(topic, group, queue_id)
        counts: dict[int, int] = {}
        if old is not None and attempt_id is not None and attempt_id == old.attempt_id:
            counts = dict(old.consumed_count)
        elif old is not None:
            seen = set(old.offsets)
            for offset in offsets:
                if offset in seen:
                    counts[offset] = old.consumed_count.get(offset, 0) + 1
        self._table.setdefault(f"{topic}@{group}", {})[queue_id] = OrderInfo(
            pop_time=pop_time,
            invisible_time=invisible_time,
            offsets=list(offsets),
            consumed_count=counts,
            last_consume_timestamp=self._clock.wall_ms(),
            attempt_id=attempt_id,
        )
        self._dirty = True
        return counts

    def commit_and_next(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int
    ) -> int:
        """``commitAndNext``: mark ``offset`` acked. Returns the queue offset to commit (the
        first un-acked offset of the batch, or past its end), -2 for an ack of an older pop,
        -1 for an offset not in the batch."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return offset + 1
        if pop_time != info.pop_time:
            log.warning(
                "popTime is not equal to orderInfo saved", topic=topic, group=group,
                queue_id=queue_id, pop_time=pop_time, saved=info.pop_time,
            )  # fmt: skip
            return -2
        if offset not in info.offsets:
            return -1
        info.commit_bits |= 1 << info.offsets.index(offset)
        self._dirty = True
        for i, o in enumerate(info.offsets):
            if not info.acked(i):
                return o
        return info.offsets[-1] + 1

    def update_next_visible_time(  # noqa: PLR0917 - upstream's signature
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, when: int
    ) -> None:
        """``updateNextVisibleTime`` (CHANGE_MESSAGE_INVISIBLETIME of an orderly handle)."""
        info = self.get(topic, group, queue_id)
        if info is None or info.pop_time != pop_time or offset not in info.offsets:
            return
        info.next_visible[offset] = when
        self._dirty = True
