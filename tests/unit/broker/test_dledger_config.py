"""DLedger CommitLog mode's keys (dledger-commitlog.md section 4): what mqbroker refuses with
one line and exit 2, how the keys map onto the member, and the send answers per quorum code."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_commitlog import answer_status
from rocketpy.broker.dledger_roles import check_dledger_config, slave_broker_id
from rocketpy.broker.dledger_store import member_config
from rocketpy.cli.broker import main
from rocketpy.common.errors import ConfigError
from rocketpy.dledger.commitlog_member.protocol import DLedgerResponseCode
from rocketpy.store.commit_log.put_types import PutMessageStatus
from rocketpy.store.config import MessageStoreConfig

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"


def _store(**keys: object) -> MessageStoreConfig:
    base: dict[str, object] = {
        "enableDLegerCommitLog": True,
        "dLegerGroup": "RaftNode00",
        "dLegerPeers": PEERS,
        "dLegerSelfId": "n1",
    }
    base.update(keys)
    return MessageStoreConfig.model_validate(base)


@pytest.mark.parametrize(
    ("broker_keys", "store_keys", "key", "says"),
    [
        ({"enableControllerMode": True, "brokerId": -1}, {}, "enableDLegerCommitLog",
         "enableControllerMode"),
        ({}, {"dLegerPeers": "n0:40911"}, "dLegerPeers", "bad dLegerPeers item"),
        ({}, {"dLegerPeers": None}, "dLegerPeers", "empty"),
        ({}, {"dLegerSelfId": "n7"}, "dLegerSelfId", "not among dLegerPeers"),
        ({}, {"dLegerSelfId": "node1"}, "dLegerSelfId", "n<digits>"),
        ({}, {"dLegerSelfId": None}, "dLegerSelfId", "n<digits>"),
        ({}, {"preferredLeaderId": "n9"}, "preferredLeaderId", "not among dLegerPeers"),
        ({}, {"dLegerPeers": "a-127.0.0.1:1;n1-127.0.0.1:2"}, "dLegerPeers", "n<digits>"),
    ],
)  # fmt: skip
def test_contradictory_or_malformed_keys_are_refused(
    broker_keys: dict[str, object], store_keys: dict[str, object], key: str, says: str
) -> None:
    """1. Check each bad combination. Expected: ConfigError naming the key and the cause."""
    broker = BrokerConfig.model_validate(broker_keys)
    with pytest.raises(ConfigError, match=says) as info:
        check_dledger_config(broker, _store(**store_keys))
    assert info.value.key == key


def test_good_keys_and_mode_off_pass() -> None:
    """A well-formed group passes; with the mode off nothing is checked."""
    check_dledger_config(BrokerConfig(), _store(preferredLeaderId="n0"))
    check_dledger_config(
        BrokerConfig.model_validate({"enableControllerMode": True, "brokerId": -1}),
        MessageStoreConfig.model_validate({"dLegerSelfId": "bogus"}),
    )


def test_mqbroker_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1. mqbroker -c with dLegerSelfId outside dLegerPeers. Expected: exit status 2, one line
    on stderr naming dLegerSelfId, nothing started (no store directory made)."""
    conf = tmp_path / "broker.conf"
    store = tmp_path / "store"
    conf.write_text(
        f"enableDLegerCommitLog=true\ndLegerPeers={PEERS}\ndLegerSelfId=n3\n"
        f"storePathRootDir={store}\n",
        encoding="utf-8",
    )
    assert main(["-c", str(conf)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "dLegerSelfId" in err[0]
    assert not store.exists()


def test_member_settings_from_broker_keys(tmp_path: Path) -> None:
    """The member gets the group (brokerName when dLegerGroup is unset), peers, self id, the
    preferred leader, batch push, data file size and the data directory override."""
    store = _store(
        dLegerGroup=None, storePathRootDir=str(tmp_path), preferredLeaderId="n2",
        enableBatchPush=True, mappedFileSizeCommitLog=65536,
        storePathDLedgerCommitLog=f"{tmp_path / 'd1'},{tmp_path / 'd2'}",
    )  # fmt: skip
    cfg = member_config(store, BrokerConfig.model_validate({"brokerName": "RaftNode07"}))
    assert (cfg.group, cfg.self_id, cfg.preferred()) == ("RaftNode07", "n1", ["n2"])
    assert cfg.peer_map["n2"] == "127.0.0.1:40913"
    assert (cfg.enable_batch_push, cfg.data_file_size) == (True, 65536)
    assert cfg.base_dir == tmp_path / "dledger-n1"
    assert cfg.data_dir == tmp_path / "d1"
    assert [slave_broker_id(n) for n in ("n0", "n1", "n2", "n10")] == [1, 2, 3, 11]


def test_quorum_answers_map_to_send_statuses() -> None:
    """Section 4's table: 200 -> PUT_OK; 502 -> in-sync replicas not enough; 404/409/505/415
    -> SERVICE_NOT_AVAILABLE; 503 -> busy; 501 and unknown codes -> UNKNOWN_ERROR."""
    c = DLedgerResponseCode
    assert answer_status(c.SUCCESS) is PutMessageStatus.PUT_OK
    assert answer_status(c.WAIT_QUORUM_ACK_TIMEOUT) is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
    for code in (c.NOT_LEADER, c.INCONSISTENT_LEADER, c.LEADER_NOT_READY, c.DISK_FULL):
        assert answer_status(code) is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert answer_status(c.LEADER_PENDING_FULL) is PutMessageStatus.OS_PAGE_CACHE_BUSY
    assert answer_status(c.TERM_CHANGED) is PutMessageStatus.UNKNOWN_ERROR
    assert answer_status(12345) is PutMessageStatus.UNKNOWN_ERROR
