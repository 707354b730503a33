"""The store as the HA layer sees it: one narrow interface, passed to the HA services when they
are built (issue 23).

Owns: :class:`ReplicationLog`, the only view of the store that ``rocketpy.ha`` may use: offsets
of the commit log, raw byte ranges to push, replicated bytes to append, truncation, the dispatch
(reput) position, and the two wiring calls (an append listener, a confirm-offset provider). The
message store implements it (``MessageStore``); the broker hands its store to the HA services
typed as this protocol, so HA code cannot reach commit-log, mapped-file or reput internals.
Must not: import any store module (it is a pure type; an import-linter contract keeps
``rocketpy.ha`` away from the modules behind it).

Mirrors the ``DefaultMessageStore`` methods upstream's HA classes call: ``getMaxPhyOffset``,
``getMinPhyOffset``, ``getCommitLogData``, ``appendToCommitLog``, ``truncateFiles``,
``getMappedFileSizeCommitLog`` (via the config), ``setConfirmOffset`` and the reput's
``reputFromOffset`` / ``wakeup``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class ReplicationLog(Protocol):
    """The commit log of one broker, for its HA master and slave.

    Offsets are physical commit-log offsets. Everything runs on the event loop; the async
    methods do their blocking work on the store's executors.
    """

    @property
    def max_phy_offset(self) -> int:
        """End of the last written byte (``getMaxPhyOffset``)."""
        ...

    @property
    def min_phy_offset(self) -> int:
        """Start of the first segment (``getMinPhyOffset``)."""
        ...

    @property
    def segment_size(self) -> int:
        """Bytes per commit-log segment (``mappedFileSizeCommitLog``)."""
        ...

    @property
    def dispatched_offset(self) -> int:
        """Where dispatching to the consume queues continues (``reputFromOffset``)."""
        ...

    def read_raw(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` written bytes from ``offset``, never crossing a segment end;
        None when nothing is written there (``getCommitLogData``)."""
        ...

    async def append_replicated(self, start_offset: int, data: bytes) -> None:
        """Write bytes the master sent at ``start_offset`` (``appendToCommitLog``).

        Raises:
            StoreError: not writable, ``start_offset`` is not the max offset, or the bytes
                cross a segment end.
        """
        ...

    def valid_end(self) -> int:
        """End of the last whole, valid record, walking from the dispatch position (the scan
        of ``AutoSwitchHAClient.truncateInvalidMsg``)."""
        ...

    async def truncate_files(self, offset: int) -> None:
        """Cut the commit log and the consume queues back to ``offset``; the cut bytes are
        zeroed so that a restart's recovery cannot bring them back (``truncateFiles``)."""
        ...

    def recover_topic_queue_table(self) -> None:
        """Rebuild the next queue offsets from the consume queues (a slave becoming master)."""
        ...

    async def settle_tail(self, *, keep: bool) -> None:
        """The first role change after a start: keep (master) or cut (slave) the last record
        an unclean stop's recovery walked, held undispatched until now (controller mode)."""
        ...

    def wake_dispatch(self) -> None:
        """New bytes or a higher confirm offset: let the reput run (``reputMessageService``)."""
        ...

    def add_append_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` on the loop after every append, local or replicated. Wiring time
        only (the HA master registers its wake-up when it is built)."""
        ...

    def set_confirm_offset_provider(self, provider: Callable[[], int]) -> None:
        """Never dispatch (make consumable) past ``provider()``: controller mode's confirm
        offset (ha.md section 3.7). Wiring time only; the last call wins."""
        ...
