"""NodeConfig, controllerDLegerPeers parsing and the ms -> ticks translation."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.errors import CodecError, ConfigError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.messages import HeartbeatRequest, VoteResponse, VoteResult
from rocketpy.dledger.node_config import NodeConfig, parse_peers, raft_timing, render_peers
from rocketpy.dledger.transport import DLedgerRequestCode, decode_command, encode_command

PEERS = "n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879"


def test_dledger_parse_peers_upstream_example() -> None:
    """1. Parse the spec's controllerDLegerPeers example. Expect: id -> address, in order, and
    render_peers gives the text back."""
    peers = parse_peers(PEERS)
    assert peers == {"n0": "127.0.0.1:9877", "n1": "127.0.0.1:9878", "n2": "127.0.0.1:9879"}
    assert render_peers(peers) == PEERS
    assert parse_peers(" n0-localhost:1 ; ") == {"n0": "localhost:1"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        ";",
        "n0",
        "n0-127.0.0.1",
        "-127.0.0.1:1",
        "n0-127.0.0.1:x",
        "n0-:1",
        "n0-h:1;n0-h:2",
        "n0-h:70000",
    ],
)
def test_dledger_parse_peers_rejects_bad_text(text: str) -> None:
    """1. Parse malformed peer text. Expect: ConfigError naming controllerDLegerPeers."""
    with pytest.raises(ConfigError) as info:
        parse_peers(text)
    assert info.value.key == "controllerDLegerPeers"


def test_dledger_node_config_validates_identity_and_timing(tmp_path: Path) -> None:
    """1. Build configs with an unknown self id, an unknown preferred leader, an election
    timeout not above the heartbeat. Expect: ConfigError for each; a good one builds."""
    peers = parse_peers(PEERS)
    with pytest.raises(ConfigError, match="controllerDLegerSelfId"):
        NodeConfig("g", "n9", peers, tmp_path)
    with pytest.raises(ConfigError, match="preferredLeaderIds"):
        NodeConfig("g", "n0", peers, tmp_path, preferred_leader="n9")
    with pytest.raises(ConfigError, match="electionTimeoutMs"):
        NodeConfig("g", "n0", peers, tmp_path, heartbeat_interval_ms=300, election_timeout_ms=300)
    cfg = NodeConfig("g", "n1", peers, tmp_path)
    assert cfg.address == "127.0.0.1:9878"


def test_dledger_raft_timing_scales_with_the_heartbeat(tmp_path: Path) -> None:
    """1. Translate 100/300 ms and the 2000/3000 ms defaults into ticks.
    Expect: ten ticks per beat; the follower timeout is the election timeout rounded to whole
    beats, never below two; the preferred leader is passed through."""
    peers = parse_peers(PEERS)
    raft, tick_ms = raft_timing(NodeConfig("g", "n0", peers, tmp_path, 100, 300))
    assert (tick_ms, raft.heartbeat_interval_ticks, raft.max_heartbeat_leak) == (10, 10, 3)
    raft, tick_ms = raft_timing(NodeConfig("g", "n0", peers, tmp_path, preferred_leader="n2"))
    assert (tick_ms, raft.max_heartbeat_leak) == (200, 2)
    assert raft.preferred_leader_ids == ("n2",)


def test_dledger_transport_command_round_trip_and_checks() -> None:
    """1. Encode a heartbeat and a vote response as remoting commands; decode them.
    2. Decode with another group, with the wrong code, with no body.
    Expect: DLedger codes (HEART_BEAT 51002, VOTE 51001), oneway, round trip equal; each bad
    command raises CodecError naming the field."""
    beat = HeartbeatRequest(
        from_id="n0", to_id="n1", term=Term(3), commit_index=LogIndex(7), beat_round=2
    )
    vote = VoteResponse(
        from_id="n1",
        to_id="n0",
        term=Term(3),
        request_term=Term(3),
        vote_round=1,
        result=VoteResult.ACCEPT,
    )
    cmd = encode_command("g", beat)
    assert cmd.code == DLedgerRequestCode.HEART_BEAT == 51002
    assert cmd.is_oneway
    assert decode_command("g", cmd) == beat
    assert encode_command("g", vote).code == DLedgerRequestCode.VOTE == 51001
    with pytest.raises(CodecError, match="group"):
        decode_command("other", cmd)
    cmd.code = DLedgerRequestCode.VOTE
    with pytest.raises(CodecError, match="code"):
        decode_command("g", cmd)
    cmd.body = None
    with pytest.raises(CodecError, match="body"):
        decode_command("g", cmd)
