"""A one-member DLedger CommitLog store in process (no broker): its settings and its start, lead
and stop, for the integration tests that drive ``DLedgerMessageStore`` directly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from rocketpy.broker.dledger_store import DLedgerMessageStore
from rocketpy.common.aio import wait_until
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.store.config import MessageStoreConfig


def one_member_config(root: Path, port: int, **extra: object) -> MessageStoreConfig:
    """Group ``broker-a`` of member n0 on ``port``; 64 KiB data files under ``root``."""
    return MessageStoreConfig.build({
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": 64 * 1024,
        "enableDLegerCommitLog": True, "dLegerGroup": "broker-a",
        "dLegerPeers": f"n0-127.0.0.1:{port}", "dLegerSelfId": "n0", **extra,
    })  # fmt: skip


@contextlib.asynccontextmanager
async def leading(store: DLedgerMessageStore, timeout_s: float = 30) -> AsyncIterator[None]:
    """Lock ``store``, start its member and then the store, wait until the member leads; on
    exit stop the store and then the member. The whole block runs within ``timeout_s``."""
    member = store.member
    async with asyncio.timeout(timeout_s):
        await store.lock()
        await member.start()
        await store.start()
        try:
            await wait_until(lambda: member.role is Role.LEADER, 10)
            yield
        finally:
            await store.stop()
            await member.shutdown()
