"""Fixtures for broker integration tests: an in-process NameServer and brokers on loopback.

``broker_factory(**config)`` starts a :class:`BrokerService` on ``127.0.0.1:0`` registered with
the ``namesrv`` fixture, with tiny timings; every broker started is stopped (with a deadline)
when the test ends. ``StoreBinding`` says which message store the brokers use and how a test
reads the records of a pull body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.service import BrokerService, ManagedStore
from rocketpy.common.clock import SYSTEM_CLOCK
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.service import NamesrvService
from tests.helpers.broker_client import JavaLikeClient
from tests.unit.broker.support import MemStore


@dataclass
class StoreBinding:
    """How brokers in a test get their store."""

    factory: Callable[[Path], Callable[[Executor], ManagedStore]]


def _mem_factory(root: Path) -> Callable[[Executor], ManagedStore]:
    return lambda executor: MemStore(SYSTEM_CLOCK.wall_ms)


@pytest.fixture
def store_binding() -> StoreBinding:
    """The store the brokers of a test run on."""
    return StoreBinding(factory=_mem_factory)


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
    }
    values.update(extra)
    return BrokerConfig.build(values)


@pytest.fixture
async def broker_factory(
    namesrv: NamesrvService, tmp_path: Path, store_binding: StoreBinding
) -> AsyncIterator[BrokerFactory]:
    """Start brokers; ``store_root`` defaults to ``tmp_path/<brokerName>``; all are stopped at
    the end."""
    started: list[BrokerService] = []

    async def make(
        *, store_root: Path | None = None, message_delay_level: str = "1s 2s 3s", **extra: object
    ) -> BrokerService:
        cfg = broker_config(namesrv, tmp_path, **extra)
        root = store_root or tmp_path / cfg.broker_name
        svc = BrokerService(
            cfg,
            store_root=root,
            store_factory=store_binding.factory(root),
            message_delay_level=message_delay_level,
        )
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
