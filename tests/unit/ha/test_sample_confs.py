"""conf/2m-*/ sample layouts: every key is known and the roles/ports fit together (issue 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig, BrokerRole
from rocketpy.ha.config import HAConfig
from rocketpy.store.config import MessageStoreConfig

CONF = Path(__file__).resolve().parents[3] / "conf"
LAYOUTS = ("2m-2s-sync", "2m-2s-async", "2m-noslave")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sample_conf_layout_loads(layout: str) -> None:
    """1. Load each file of the layout as broker, store and HA settings.
    Expected: no key unknown to all three; masters have id 0, slaves id 1 and role SLAVE;
    every listen and HA port is distinct; sync masters wait for 2 replicas."""
    files = sorted((CONF / layout).glob("*.properties"))
    assert files
    ports: list[int] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        broker, unknown_b = BrokerConfig.load(file_text=text, env={})
        _, unknown_s = MessageStoreConfig.load(file_text=text, env={})
        ha, unknown_h = HAConfig.load(file_text=text, env={})
        assert set(unknown_b) & set(unknown_s) & set(unknown_h) == set(), path
        slave = path.stem.endswith("-s")
        assert (broker.broker_role == BrokerRole.SLAVE) == slave, path
        assert broker.broker_id == (1 if slave else 0), path
        if broker.broker_role == BrokerRole.SYNC_MASTER:
            assert ha.in_sync_replicas == 2
        ports += [broker.listen_port, ha.ha_listen_port]
    assert len(set(ports)) == len(ports)
