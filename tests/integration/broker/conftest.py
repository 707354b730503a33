"""Fixtures for broker integration tests: an in-process NameServer and brokers on loopback.

``broker_factory(**config)`` starts a :class:`BrokerService` on ``127.0.0.1:0`` registered with
the ``namesrv`` fixture, on the real message store with tiny segments and timings; every broker
started is stopped (with a deadline) when the test ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.service import BrokerService
from rocketpy.common.aio import wait_until
from rocketpy.ha.config import HAConfig
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.service import NamesrvService
from rocketpy.store.config import MessageStoreConfig
from tests.helpers.broker_client import JavaLikeClient


def store_config(root: Path, **extra: object) -> MessageStoreConfig:
    """A store with tiny segments (64 KiB commit log, 100-unit consume queues)."""
    values: dict[str, object] = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 64 * 1024,
        "mappedFileSizeConsumeQueue": 20 * 100,
        "flushIntervalCommitLog": 50,
        "flushIntervalConsumeQueue": 50,
    }
    values.update(extra)
    return MessageStoreConfig.build(values)


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvService]:
    """A NameServer on 127.0.0.1:0 with a 50 ms broker scan."""
    service = NamesrvService(
        NamesrvConfig.build(
            {
                "listenPort": 0,
                "bindAddress": "127.0.0.1",
                "kvConfigPath": str(tmp_path / "ns" / "kvConfig.json"),
                "configStorePath": str(tmp_path / "ns" / "namesrv.properties"),
                "scanNotActiveBrokerInterval": 50,
            }
        )
    )
    await service.start()
    yield service
    async with asyncio.timeout(10):
        await service.stop()


BrokerFactory = Callable[..., Awaitable[BrokerService]]


def broker_config(namesrv: NamesrvService, root: Path, **extra: object) -> BrokerConfig:
    """Loopback, port 0, short timings."""
    values: dict[str, object] = {
        "brokerName": "broker-a",
        "brokerClusterName": "DefaultCluster",
        "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "listenPort": 0,
        "namesrvAddr": namesrv.address,
        "registerNameServerPeriod": 200,
        "registerBrokerTimeoutMills": 3000,
        "flushConsumerOffsetInterval": 100,
        "flushDelayOffsetInterval": 100,
        "longPollingCheckInterval": 100,
        "clientChannelScanInterval": 100,
        "scheduleScanInterval": 50,
        "shutdownTimeoutMillis": 5000,
        "messageDelayLevel": "1s 2s 3s",
        "maxHashSlotNum": 64,
        "maxIndexNum": 256,
    }
    values.update(extra)
    return BrokerConfig.build(values)


@pytest.fixture
async def broker_factory(namesrv: NamesrvService, tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    """Start brokers; ``store_root`` defaults to ``tmp_path/<brokerName>``; ``ha`` HA keys
    (replication on, ``haListenPort=0`` unless given); all are stopped at the end."""
    started: list[BrokerService] = []

    async def make(
        *,
        store_root: Path | None = None,
        store: Mapping[str, object] | None = None,
        ha: Mapping[str, object] | None = None,
        **extra: object,
    ) -> BrokerService:
        cfg = broker_config(namesrv, tmp_path, **extra)
        root = store_root or tmp_path / cfg.broker_name
        ha_config = HAConfig.build({"haListenPort": 0, **ha}) if ha is not None else None
        svc = BrokerService(cfg, store_config(root, **(store or {})), ha_config=ha_config)
        async with asyncio.timeout(10):
            await svc.start()
        started.append(svc)
        return svc

    yield make
    for svc in reversed(started):
        async with asyncio.timeout(10):
            await svc.stop()


@pytest.fixture
async def client() -> AsyncIterator[JavaLikeClient]:
    """A Java-like client; closed at the end."""
    c = JavaLikeClient()
    yield c
    async with asyncio.timeout(5):
        await c.close()


async def dispatched(broker: BrokerService, topic: str, count: int, queue_id: int = 0) -> None:
    """Wait until the store's reput made ``count`` messages of ``topic/queue_id`` consumable
    (dispatch is asynchronous, as upstream's ReputMessageService)."""
    await wait_until(lambda: broker.store.max_offset_in_queue(topic, queue_id) >= count, 5)
