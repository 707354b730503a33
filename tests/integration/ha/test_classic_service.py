"""DefaultHAService send-path decisions (ha.md section 2.4, 5.x) on a real store and listener."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.ha.classic.service import DefaultHAService
from rocketpy.ha.config import HAConfig
from rocketpy.ha.state import ReplicaStatus
from rocketpy.store.commit_log.put_types import MessageToStore
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration


@asynccontextmanager
async def _service(
    root: Path, *, sync_master: bool = True, auto: bool = False, **keys: Any
) -> AsyncIterator[DefaultHAService]:
    store = MessageStore(MessageStoreConfig.build({
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": 65536,
    }))  # fmt: skip
    await store.start()
    values: dict[str, Any] = {"haListenPort": 0, "slaveTimeout": 200, "haReconnectInterval": 50}
    values.update(keys)
    ha = DefaultHAService(store, HAConfig.build(values), sync_master=sync_master,
                          auto_in_sync_replicas=auto)  # fmt: skip
    await ha.start("127.0.0.1")
    try:
        yield ha
    finally:
        await ha.stop()
        await store.stop()


async def _append(ha: DefaultHAService) -> int:
    store = ha.master.store  # the service sees it as a ReplicationLog; the test puts
    assert isinstance(store, MessageStore)
    r = await store.put_message(MessageToStore(topic="T", queue_id=0, body=b"x" * 50))
    return r.wrote_offset + r.wrote_bytes


async def test_default_ha_service_role_and_wait_flags(tmp_path: Path) -> None:
    """1. inSyncReplicas=2 with no slave: an ASYNC_MASTER, a WAIT=false send, and a SYNC_MASTER
    send. Expected: PUT_OK, PUT_OK, and FLUSH_SLAVE_TIMEOUT after slaveTimeout; with
    inSyncReplicas=1 a SYNC_MASTER does not wait (5.x). waits_for_replicas (the broker's
    no-await send path) is True only for the SYNC_MASTER send that can wait."""
    async with _service(tmp_path / "a", sync_master=False, inSyncReplicas=2) as ha:
        assert not ha.waits_for_replicas(wait_store=True)
        assert await ha.handle_ha(await _append(ha), wait_store=True) is ReplicaStatus.PUT_OK
    async with _service(tmp_path / "b", inSyncReplicas=2) as ha:
        assert ha.waits_for_replicas(wait_store=True)
        assert not ha.waits_for_replicas(wait_store=False)
        end = await _append(ha)
        assert await ha.handle_ha(end, wait_store=False) is ReplicaStatus.PUT_OK
        status = await ha.handle_ha(end, wait_store=True)
        assert status is ReplicaStatus.FLUSH_SLAVE_TIMEOUT
    async with _service(tmp_path / "c", inSyncReplicas=1) as ha:
        assert not ha.waits_for_replicas(wait_store=True)
        assert await ha.handle_ha(await _append(ha), wait_store=True) is ReplicaStatus.PUT_OK


async def test_default_ha_service_auto_in_sync_replicas(tmp_path: Path) -> None:
    """1. Acting-master mode, inSyncReplicas=2, enableAutoInSyncReplicas, no slave connected.
    2. minInSyncReplicas=1, then minInSyncReplicas=2.
    Expected: the need drops to 1 (PUT_OK at once); with a minimum of 2 the service refuses
    before the append (can_accept False)."""
    keys: dict[str, Any] = {"inSyncReplicas": 2, "enableAutoInSyncReplicas": True}
    async with _service(tmp_path / "a", auto=True, minInSyncReplicas=1, **keys) as ha:
        assert ha.can_accept(0)
        assert ha.need_ack_nums(0) == (1, True)
        assert await ha.handle_ha(await _append(ha), wait_store=True) is ReplicaStatus.PUT_OK
    async with _service(tmp_path / "b", auto=True, minInSyncReplicas=2, **keys) as ha:
        assert not ha.can_accept(0)


async def test_default_ha_service_slave_catches_up_and_counts(tmp_path: Path) -> None:
    """1. A SYNC_MASTER (inSyncReplicas=2) and a slave service pointed at it.
    2. Append and handle_ha. Expected: PUT_OK; the master counts 2 in-sync replicas and the
    4.9 "slave OK" check passes; the slave's statistics show one connection."""
    async with _service(tmp_path / "m", inSyncReplicas=2) as master:
        assert not master.master.is_slave_ok(0)
        async with _service(tmp_path / "s", sync_master=False) as slave:
            slave.update_ha_master_address(f"127.0.0.1:{master.port}")
            await wait_until(lambda: len(master.slaves()) == 1, 5)
            end = await _append(master)
            assert await master.handle_ha(end, wait_store=True) is ReplicaStatus.PUT_OK
            assert master.in_sync_replicas_nums(end) == 2
            assert master.master.is_slave_ok(end)
            assert slave.client_statistics().connects == 1


async def test_s04_quorum_write_degrades_with_in_sync_replicas(tmp_path: Path) -> None:
    """S-04. 1. Acting-master mode: totalReplicas=3, inSyncReplicas=3, minInSyncReplicas=2,
    enableAutoInSyncReplicas; two slaves connected and caught up. 2. Stop one slave. 3. Stop the
    other. Expected: writes need 3 acks with 3 in sync (and get them), 2 with 2 in sync (and get
    them), and with 1 in sync the service refuses before the append (in-sync replicas not
    enough)."""
    keys: dict[str, Any] = {
        "totalReplicas": 3, "inSyncReplicas": 3, "minInSyncReplicas": 2,
        "enableAutoInSyncReplicas": True,
    }  # fmt: skip
    async with _service(tmp_path / "m", auto=True, **keys) as master:
        addr = f"127.0.0.1:{master.port}"
        async with _service(tmp_path / "s1", sync_master=False) as s1:
            s1.update_ha_master_address(addr)
            async with _service(tmp_path / "s2", sync_master=False) as s2:
                s2.update_ha_master_address(addr)
                await wait_until(lambda: len(master.slaves()) == 2, 5)
                end = await _append(master)
                await wait_until(lambda: master.in_sync_replicas_nums(end) == 3, 5)
                assert master.need_ack_nums(end) == (3, True)
                assert await master.handle_ha(end, wait_store=True) is ReplicaStatus.PUT_OK
            await wait_until(lambda: len(master.slaves()) == 1, 5)
            end = await _append(master)
            await wait_until(lambda: master.in_sync_replicas_nums(end) == 2, 5)
            assert master.need_ack_nums(end) == (2, True)
            assert master.can_accept(end)
            assert await master.handle_ha(end, wait_store=True) is ReplicaStatus.PUT_OK
        await wait_until(lambda: not master.slaves(), 5)
        assert master.need_ack_nums(master.master.store.max_phy_offset) == (2, False)
        assert not master.can_accept(master.master.store.max_phy_offset)
