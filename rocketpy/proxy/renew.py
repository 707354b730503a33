"""Auto renew (``enableProxyAutoRenew``): the receipt handles a client asked the proxy to keep.

Owns: :class:`ReceiptHandleManager`, the table of upstream's ``DefaultReceiptHandleManager``
(``ReceiptHandleGroup`` per client and group, keyed by message id): handles of messages received
with ``auto_renew`` are added at receive; Ack/ChangeInvisibleDuration/ForwardMessageToDLQ look up
the latest handle of a message (:meth:`~ReceiptHandleManager.latest`) and drop it; :meth:`due`
lists the handles whose invisibility ends within ``renewAheadTimeMillis``, each with the next
invisible time of ``RenewStrategyPolicy`` (1 m, 3 m, 5 m, 10 m, 30 m, 1 h), or, once
``renewMaxTimeMillis`` has passed since the receive, the group's retry back-off for the
message's reconsume count (then the handle is dropped after that last change).
``rocketpy/proxy/grpc_server.py`` runs the renew round every ``renewSchedulePeriodMillis`` through
``ConsumerActivity.renew_due``. Must not: do I/O. Pure (the caller passes wall-clock ms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import CodecError
from rocketpy.proxy.client_settings import DEFAULT_CUSTOMIZED_BACKOFF_MS
from rocketpy.remoting.protocol.pop import decode_extra_info

#: ``RenewStrategyPolicy``'s steps (ms).
RENEW_STEPS_MS: Final = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)


@dataclass(slots=True, kw_only=True)
class TrackedHandle:
    """``MessageReceiptHandle``: one message's latest handle and how often it was renewed."""

    group: str
    topic: str
    message_id: str
    handle: str
    reconsume_times: int = 0
    received_ms: int = 0
    renew_times: int = 0


@dataclass(frozen=True, slots=True)
class RenewTask:
    """One renewal to do: the handle (as of :meth:`ReceiptHandleManager.due`), the new
    invisible time, and whether this is the last change (then the handle is dropped)."""

    client_id: str
    tracked: TrackedHandle
    invisible_ms: int
    last: bool


class ReceiptHandleManager:
    """Handles by (client id, group, message id).

    Args:
        ahead_ms: ``renewAheadTimeMillis``.
        max_ms: ``renewMaxTimeMillis``.
    """

    def __init__(self, ahead_ms: int, max_ms: int) -> None:
        self._ahead_ms = ahead_ms
        self._max_ms = max_ms
        self._table: dict[tuple[str, str, str], TrackedHandle] = {}

    def __len__(self) -> int:
        return len(self._table)

    def add(self, client_id: str, tracked: TrackedHandle, now_ms: int) -> None:
        """``addReceiptHandle``: keep renewing ``tracked`` from now on."""
        tracked.received_ms = tracked.received_ms or now_ms
        self._table[(client_id, tracked.group, tracked.message_id)] = tracked

    def latest(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """The handle to use for ``message_id``: the renewed one if the proxy holds it."""
        tracked = self._table.get((client_id, group, message_id))
        return tracked.handle if tracked is not None else handle

    def remove(self, client_id: str, group: str, message_id: str) -> TrackedHandle | None:
        """``removeReceiptHandle``: stop renewing (acked, changed, dead-lettered)."""
        return self._table.pop((client_id, group, message_id), None)

    def remove_client(self, client_id: str) -> list[TrackedHandle]:
        """Everything held for a client that went away (``clearGroup``)."""
        keys = [k for k in self._table if k[0] == client_id]
        return [self._table.pop(k) for k in keys]

    def renewed(self, client_id: str, tracked: TrackedHandle, new_handle: str) -> None:
        """Record a successful renewal (the table keeps the new handle)."""
        key = (client_id, tracked.group, tracked.message_id)
        if self._table.get(key) is tracked:
            tracked.handle = new_handle
            tracked.renew_times += 1

    def due(self, now_ms: int) -> list[RenewTask]:
        """The renewals of this round (``scheduleRenewTask``); garbled or expired handles are
        dropped (nothing left to renew)."""
        tasks: list[RenewTask] = []
        for key, tracked in list(self._table.items()):
            try:
                info = decode_extra_info(tracked.handle)
            except CodecError:
                del self._table[key]
                continue
            visible_at = info.pop_time + info.invisible_time
            if visible_at <= now_ms:
                del self._table[key]
                continue
            if visible_at - now_ms > self._ahead_ms:
                continue
            if now_ms - tracked.received_ms < self._max_ms:
                step = RENEW_STEPS_MS[min(tracked.renew_times, len(RENEW_STEPS_MS) - 1)]
                tasks.append(RenewTask(key[0], tracked, step, last=False))
            else:
                backoff = DEFAULT_CUSTOMIZED_BACKOFF_MS
                delay = backoff[min(tracked.reconsume_times, len(backoff) - 1)]
                tasks.append(RenewTask(key[0], tracked, delay, last=True))
                del self._table[key]
        return tasks
