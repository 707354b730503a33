"""ControllerConfig: upstream defaults; missing Raft keys and contradictions fail in one line."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import ConfigError
from rocketpy.controller.config import ControllerConfig, parse_peer_list

PEERS = "n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879"


def test_controller_config_upstream_defaults() -> None:
    """A minimal config has upstream's ControllerConfig defaults and serves on its peer port."""
    c = ControllerConfig.build({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n1"})
    assert c.scan_not_active_broker_interval_ms == 5000
    assert c.scan_inactive_master_interval_ms == 5000
    assert (c.elect_master_max_retry_count, c.enable_elect_unclean_master) == (3, False)
    assert (c.notify_broker_role_changed, c.is_process_read_event) == (True, False)
    assert c.self_address() == "127.0.0.1:9878"
    assert c.black_list() >= {"configBlackList", "configStorePath", "rocketmqHome"}
    assert c.store_path().name == "DLedgerController"


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"controllerDLegerSelfId": "n0"}, "controllerDLegerPeers"),
        ({"controllerDLegerPeers": PEERS}, "controllerDLegerSelfId"),
        (
            {"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n7"},
            "controllerDLegerSelfId",
        ),
        (
            {"controllerDLegerPeers": "n0:127.0.0.1", "controllerDLegerSelfId": "n0"},
            "controllerDLegerPeers",
        ),
        (
            {
                "controllerDLegerPeers": PEERS,
                "controllerDLegerSelfId": "n0",
                "controllerDLegerHeartBeatTimeIntervalMs": 5000,
            },
            "controllerDLegerHeartBeatTimeIntervalMs",
        ),
    ],
)
def test_controller_config_rejects_missing_or_contradictory(
    values: dict[str, object], key: str
) -> None:
    """Missing peers/self id, a self id not among the peers, an unparsable peer list or a
    heartbeat not below the election timeout -> ConfigError naming the key, one line."""
    with pytest.raises(ConfigError) as info:
        ControllerConfig.build(values)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_controller_parse_peer_list() -> None:
    """id-host:port items split on ';' (empty items ignored); repeats and bad ports refused."""
    assert parse_peer_list("n0-127.0.0.1:9877;;n1-h-1:9878;") == {
        "n0": "127.0.0.1:9877",
        "n1": "h-1:9878",
    }
    for bad in ("n0-127.0.0.1:9877;n0-127.0.0.1:9878", "n0-127.0.0.1:65536", "", "n0-:1"):
        with pytest.raises(ValueError, match=r"peer|no peers"):
            parse_peer_list(bad)
