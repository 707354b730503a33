"""ManagedStore: the message store as the broker service runs it, and the default one.

Owns: the life-cycle half of the store interface (start, stop, the store host once bound) on top
of :class:`~rocketpy.broker.store_api.BrokerStore`, and the factory that builds
``rocketpy.store``'s MessageStore behind :class:`MessageStoreAdapter`. Mirrors the
``messageStore`` field of ``BrokerController`` and where ``initialize`` builds it. Must not: open
anything (``service.py`` starts and stops the store).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_store import DLedgerStoreAdapter
from rocketpy.broker.store_adapter import MessageStoreAdapter
from rocketpy.broker.store_api import BrokerStore
from rocketpy.common.clock import Clock
from rocketpy.ha.config import HAConfig
from rocketpy.store.config import MessageStoreConfig


class ManagedStore(BrokerStore, Protocol):
    """A :class:`BrokerStore` with a life cycle."""

    async def start(self) -> None:
        """Open, recover and start dispatching; return when reads and writes are served."""
        ...

    async def stop(self) -> None:
        """Flush the commit log and consume queues, write the checkpoint, close files."""
        ...

    def set_store_host(self, host: tuple[str, int]) -> None:
        """This broker's ``brokerIP1:port`` once bound (records and offset msg ids carry it)."""
        ...


#: Builds the (unopened) message store.
StoreFactory = Callable[[], ManagedStore]


def default_store_factory(
    config: BrokerConfig,
    store_config: MessageStoreConfig,
    clock: Clock,
    ha_config: HAConfig | None = None,
) -> StoreFactory:
    """``rocketpy.store``'s MessageStore behind the broker's store calls (with classic HA when
    ``ha_config`` is given); with ``enableDLegerCommitLog=true`` the DLedger CommitLog store,
    which replicates through its DLedger member instead."""
    if store_config.enable_dleger_commit_log:
        return lambda: DLedgerStoreAdapter(store_config, config, clock=clock)
    return lambda: MessageStoreAdapter(store_config, config, clock=clock, ha=ha_config)
