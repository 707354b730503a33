"""Consumer offsets kept in memory and committed to the brokers (clustering mode).

Owns: :class:`RemoteBrokerOffsetStore` (``RemoteBrokerOffsetStore``): the next offset to consume
per queue, increase-only updates from consumption, reads for the in-pull COMMIT_OFFSET flag, and
``persist`` via UPDATE_CONSUMER_OFFSET (client-flows.md section 4.4); and :class:`OffsetCell`, one
queue's entry, which a process queue holds to advance the offset after every consumed batch
without a table lookup (hashing a MessageQueue twice per message was a visible cost).
"""

from __future__ import annotations

import structlog

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageQueue
from rocketpy.client.pull_api import update_consumer_offset
from rocketpy.common.errors import ClientError, RemotingError

log = structlog.get_logger(__name__)


class OffsetCell:
    """The in-memory offset of one queue (-1: none yet)."""

    __slots__ = ("value",)

    def __init__(self, value: int = -1) -> None:
        self.value = value

    def advance(self, offset: int) -> None:
        """Increase-only update (a consumed batch)."""
        self.value = max(self.value, offset)


class RemoteBrokerOffsetStore:
    """Offsets of one consumer group."""

    def __init__(self, client: ClientInstance, group: str) -> None:
        self._client = client
        self._group = group
        self._table: dict[MessageQueue, OffsetCell] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool) -> None:
        """Remember ``offset`` as the next offset to consume of ``mq``."""
        cell = self._table.get(mq)
        if cell is None:
            self._table[mq] = OffsetCell(offset)
        elif not increase_only or offset > cell.value:
            cell.value = offset

    def cell(self, mq: MessageQueue) -> OffsetCell:
        """``mq``'s entry (created at -1 when missing); it stays valid until :meth:`remove`."""
        cell = self._table.get(mq)
        if cell is None:
            cell = self._table[mq] = OffsetCell()
        return cell

    def read(self, mq: MessageQueue) -> int:
        """The in-memory offset, -1 when none."""
        cell = self._table.get(mq)
        return -1 if cell is None else cell.value

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (it was reassigned)."""
        self._table.pop(mq, None)

    async def persist(self, mq: MessageQueue) -> None:
        """Commit ``mq``'s offset to its broker; failures are logged."""
        cell = self._table.get(mq)
        if cell is None or cell.value < 0:
            return
        offset = cell.value
        try:
            await update_consumer_offset(self._client, self._group, mq, offset)
        except (RemotingError, ClientError) as e:
            log.warning("updateConsumeOffsetToBroker exception", mq=str(mq), error=str(e))

    async def persist_all(self, mqs: list[MessageQueue]) -> None:
        """Commit every offset of ``mqs`` (the 5 s ``persistConsumerOffset`` task)."""
        for mq in mqs:
            await self.persist(mq)
