"""conf/controller/broker-n*.conf and the controller-mode keys of BrokerConfig (issue 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.common.errors import ConfigError
from rocketpy.controller.config import ControllerConfig
from rocketpy.ha.config import HAConfig
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.store.config import MessageStoreConfig

CONF = Path(__file__).resolve().parents[3] / "conf" / "controller"


def test_controller_mode_defaults_are_upstream() -> None:
    """1. Build a BrokerConfig with no keys. Expected: controller mode off and the periods,
    timeouts and priority of upstream's BrokerConfig (controller.md section 10)."""
    cfg = BrokerConfig.build({})
    assert not cfg.enable_controller_mode
    assert cfg.controller_addr_list == []
    assert (
        cfg.sync_broker_metadata_period_ms,
        cfg.check_sync_state_set_period_ms,
        cfg.sync_controller_metadata_period_ms,
        cfg.controller_heartbeat_timeout_ms,
        cfg.broker_heartbeat_interval_ms,
        cfg.broker_election_priority,
    ) == (5000, 5000, 10000, 10000, 1000, 2**31 - 1)


def test_controller_mode_broker_id_minus_one_only_in_controller_mode() -> None:
    """1. brokerId=-1 with and without enableControllerMode. Expected: accepted with it (the
    controller assigns the id), a ConfigError without it."""
    assert BrokerConfig.build({"brokerId": "-1", "enableControllerMode": "true"}).broker_id == -1
    with pytest.raises(ConfigError):
        BrokerConfig.build({"brokerId": "-1"})


def test_controller_mode_bad_controller_addr_refused() -> None:
    """1. controllerAddr without a port. Expected: ConfigError naming the key."""
    with pytest.raises(ConfigError, match="controllerAddr"):
        BrokerConfig.build({"controllerAddr": "127.0.0.1:9877;nohost"})


def test_controller_mode_sample_confs_fit_the_controller_group() -> None:
    """1. Load conf/controller/broker-n{0,1,2}.conf as broker, store and HA settings and the
    controllers' peer list. Expected: no unknown key; controller mode on; controllerAddr lists
    exactly the controllers' peer addresses; ports and store directories are distinct."""
    peers = ControllerConfig.load(
        file_text=(CONF / "controller-n0.conf").read_text(encoding="utf-8"), env={}
    )[0].controller_dleger_peers
    peer_addrs = sorted(p.split("-", 1)[1] for p in peers.split(";"))
    ports: list[int] = []
    roots: set[str] = set()
    for i in range(3):
        text = (CONF / f"broker-n{i}.conf").read_text(encoding="utf-8")
        broker, unknown_b = BrokerConfig.load(file_text=text, env={})
        store, unknown_s = MessageStoreConfig.load(file_text=text, env={})
        ha, unknown_h = HAConfig.load(file_text=text, env={})
        assert set(unknown_b) & set(unknown_s) & set(unknown_h) == set()
        assert broker.enable_controller_mode
        assert sorted(broker.controller_addr_list) == peer_addrs
        ports += [broker.listen_port, ha.ha_listen_port]
        roots.add(store.store_path_root_dir)
    assert len(set(ports)) == 6
    assert len(roots) == 3


def test_quick_start_confs_point_brokers_at_the_embedded_controller() -> None:
    """1. Load conf/controller/quick-start/namesrv.conf as NameServer and controller settings
    and broker-n{0,1}.conf as broker, store and HA settings.
    Expected: no unknown key; the NameServer embeds the controller; each broker's controllerAddr
    is exactly the controller's peer address and its namesrvAddr the NameServer's port; ports
    and store directories are distinct."""
    text = (CONF / "quick-start" / "namesrv.conf").read_text(encoding="utf-8")
    namesrv, unknown_n = NamesrvConfig.load(file_text=text, env={})
    controller, unknown_c = ControllerConfig.load(file_text=text, env={})
    assert set(unknown_n) & set(unknown_c) == set()
    assert namesrv.enable_controller_in_namesrv
    peer = controller.controller_dleger_peers.split("-", 1)[1]
    ports: set[int] = set()
    roots: set[str] = set()
    for i in range(2):
        text = (CONF / "quick-start" / f"broker-n{i}.conf").read_text(encoding="utf-8")
        broker, unknown_b = BrokerConfig.load(file_text=text, env={})
        store, unknown_s = MessageStoreConfig.load(file_text=text, env={})
        ha, unknown_h = HAConfig.load(file_text=text, env={})
        assert set(unknown_b) & set(unknown_s) & set(unknown_h) == set()
        assert broker.enable_controller_mode
        assert broker.controller_addr_list == [peer]
        assert broker.namesrv_addr == f"127.0.0.1:{namesrv.listen_port}"
        ports |= {broker.listen_port, ha.ha_listen_port}
        roots.add(store.store_path_root_dir)
    assert len(ports) == 4
    assert len(roots) == 2
