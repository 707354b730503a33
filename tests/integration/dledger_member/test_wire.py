"""The 0.3.1.2 peer port as a Java client sees it: request -> response on the same opaque,
remoting code 200, JSON bodies, the outcome in the body's ``code``."""

from __future__ import annotations

from typing import Any

import pytest

from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RequestTimeout
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    Base,
    DLedgerResponseCode,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
    decode_body,
    encode_body,
)
from rocketpy.dledger.transport import DLedgerRequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.dledger_member import Group

pytestmark = pytest.mark.integration

G = "RaftNode00"


async def _call(client: RemotingClient, addr: str, code: int, body: Base, kind: type[Any]) -> Any:
    request = RemotingCommand.request(code, None, encode_body(body))  # type: ignore[arg-type]
    reply = await client.invoke(addr, request, 3.0)
    assert reply.is_response
    assert reply.opaque == request.opaque
    assert reply.code == 200
    assert reply.ext_fields in (None, {})
    assert reply.body
    return decode_body(reply.body, kind)


async def test_peer_port_answers_like_dledger_0_3_1_2(make_group: Any) -> None:
    g: Group = await make_group()
    leader = await g.wait_leader()
    lid = leader.config.self_id
    follower = next(m for m in g.members.values() if m is not leader)
    fid = follower.config.self_id
    client = RemotingClient(name="test-dledger-client")
    try:
        addr = leader.config.self_address
        meta = await _call(
            client, addr, DLedgerRequestCode.METADATA,
            MetadataRequest(group=G, remote_id=lid), MetadataResponse,
        )  # fmt: skip
        assert meta.code == 200
        assert meta.leader_id == lid
        assert dict(meta.peers) == leader.config.peer_map
        # a follower knows the same leader
        fmeta = await _call(
            client, follower.config.self_address, DLedgerRequestCode.METADATA,
            MetadataRequest(group=G, remote_id=fid), MetadataResponse,
        )  # fmt: skip
        assert fmeta.leader_id == lid
        # wrong receiver -> 401, wrong group -> 400
        wrong = await _call(
            client, addr, DLedgerRequestCode.HEART_BEAT,
            HeartBeatRequest(group=G, remote_id=fid, leader_id=fid, term=99), HeartBeatResponse,
        )  # fmt: skip
        assert wrong.code == DLedgerResponseCode.UNKNOWN_MEMBER
        other = await _call(
            client, addr, DLedgerRequestCode.VOTE,
            VoteRequest(group="other", remote_id=lid, leader_id=fid, term=99), VoteResponse,
        )  # fmt: skip
        assert other.code == DLedgerResponseCode.UNKNOWN_GROUP
        # a stale vote: the ledger check comes first, then the term
        stale = await _call(
            client, addr, DLedgerRequestCode.VOTE,
            VoteRequest(group=G, remote_id=lid, local_id=fid, leader_id=fid, term=0,
                        ledger_end_index=-1, ledger_end_term=-1),
            VoteResponse,
        )  # fmt: skip
        assert stale.vote_result is VoteResult.REJECT_EXPIRED_VOTE_TERM
        assert stale.term == leader.term
        # APPEND through the port: answered after the quorum with index and pos
        appended = await _call(
            client, addr, DLedgerRequestCode.APPEND,
            AppendEntryRequest(group=G, remote_id=lid, body=b"x" * 64), AppendEntryResponse,
        )  # fmt: skip
        assert appended.code == 200
        assert (appended.index, appended.pos) == (0, 0)
        got = await _call(
            client, addr, DLedgerRequestCode.GET,
            GetEntriesRequest(group=G, remote_id=lid, begin_index=0), GetEntriesResponse,
        )  # fmt: skip
        assert len(got.entries) == 1
        assert got.entries[0].index == 0
        assert got.entries[0].term == leader.term
        assert got.entries[0].body == leader.store.get(0).body
        # followers refuse APPEND (404) and GET
        refused = await _call(
            client, follower.config.self_address, DLedgerRequestCode.APPEND,
            AppendEntryRequest(group=G, remote_id=fid, body=b"y" * 64), AppendEntryResponse,
        )  # fmt: skip
        assert refused.code == DLedgerResponseCode.NOT_LEADER
        assert refused.leader_id == lid
        # a COMPARE from a stranger with a different entry -> 406 with the follower's range
        cmp = await _call(
            client, follower.config.self_address, DLedgerRequestCode.PUSH,
            PushEntryRequest(group=G, remote_id=fid, local_id=lid, leader_id=lid,
                             term=leader.term, type=PushType.COMPARE,
                             entry=got.entries[0].__class__(index=0, term=leader.term, pos=0,
                                                            body=b"z" * 64)),
            PushEntryResponse,
        )  # fmt: skip
        assert cmp.code == DLedgerResponseCode.INCONSISTENT_STATE
        assert (cmp.index, cmp.begin_index, cmp.end_index) == (0, 0, 0)
        # PULL is registered but never answered (upstream's handler returns null);
        # INSTALL_SNAPSHOT (0.4 only) is not a code this member knows
        with pytest.raises(RequestTimeout):
            await client.invoke(
                addr, RemotingCommand.request(DLedgerRequestCode.PULL, None, b"{}"), 0.3
            )
        unknown = await client.invoke(
            addr, RemotingCommand.request(DLedgerRequestCode.INSTALL_SNAPSHOT, None, b"{}"), 3.0
        )
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        # an operator's LEADERSHIP_TRANSFER to the leader: answered 200 once the follower leads.
        # 418 (TAKE_LEADERSHIP_FAILED) is DLedger's answer when the third member's campaign at
        # the new term beat the transferee's (its vote interval is 50-150 ms here, and a loaded
        # machine can delay the transferee's revote longer): the operator asks again.
        codes: list[int] = []
        for _ in range(3):
            current = await g.wait_leader()
            if current.config.self_id == fid:
                break  # a later campaign of the transferee won after a 418
            moved = await _call(
                client, current.config.self_address, DLedgerRequestCode.LEADERSHIP_TRANSFER,
                LeadershipTransferRequest(group=G, remote_id=current.config.self_id,
                                          local_id="admin", term=current.term,
                                          transfer_id=current.config.self_id, transferee_id=fid),
                LeadershipTransferResponse,
            )  # fmt: skip
            codes.append(moved.code)
            if moved.code != DLedgerResponseCode.TAKE_LEADERSHIP_FAILED:
                assert moved.code == 200, moved
                break
        assert codes  # the first leader was not the transferee
        assert (await g.wait_leader()).config.self_id == fid
    finally:
        await client.close()
