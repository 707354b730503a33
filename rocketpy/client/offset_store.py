"""Consumer offsets kept in memory and committed to the brokers (clustering mode).

Owns: :class:`RemoteBrokerOffsetStore` (``RemoteBrokerOffsetStore``): the next offset to consume
per queue, increase-only updates from consumption, reads for the in-pull COMMIT_OFFSET flag, and
``persist`` via UPDATE_CONSUMER_OFFSET (client-flows.md section 4.4).
"""

from __future__ import annotations

import structlog

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageQueue
from rocketpy.client.pull_api import update_consumer_offset
from rocketpy.common.errors import ClientError, RemotingError

log = structlog.get_logger(__name__)


class RemoteBrokerOffsetStore:
    """Offsets of one consumer group."""

    def __init__(self, client: ClientInstance, group: str) -> None:
        self._client = client
        self._group = group
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool) -> None:
        """Remember ``offset`` as the next offset to consume of ``mq``."""
        old = self._table.get(mq)
        if old is None or not increase_only or offset > old:
            self._table[mq] = offset

    def read(self, mq: MessageQueue) -> int:
        """The in-memory offset, -1 when none."""
        return self._table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (it was reassigned)."""
        self._table.pop(mq, None)

    async def persist(self, mq: MessageQueue) -> None:
        """Commit ``mq``'s offset to its broker; failures are logged."""
        offset = self._table.get(mq)
        if offset is None or offset < 0:
            return
        try:
            await update_consumer_offset(self._client, self._group, mq, offset)
        except (RemotingError, ClientError) as e:
            log.warning("updateConsumeOffsetToBroker exception", mq=str(mq), error=str(e))

    async def persist_all(self, mqs: list[MessageQueue]) -> None:
        """Commit every offset of ``mqs`` (the 5 s ``persistConsumerOffset`` task)."""
        for mq in mqs:
            await self.persist(mq)
