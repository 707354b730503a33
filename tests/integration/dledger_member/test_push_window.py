"""A follower's peer port holds a leader's whole push window: ``maxPendingSize`` APPEND pushes
parked behind a gap are never refused by the transport (a push answered SYSTEM_BUSY is dropped
by the leader and resent only after ``maxPushTimeOutMs``, and every push behind it waits)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.dledger.commitlog_member.protocol import (
    DLedgerResponseCode,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    decode_body,
    encode_body,
)
from rocketpy.dledger.transport import DLedgerRequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.store.dledger_log.entry import DLedgerEntry
from tests.helpers.dledger_member import IDS, Group

pytestmark = pytest.mark.integration

WINDOW = 1100  # above the transport's default 1024 in flight, within maxPendingSize + slack


async def test_follower_parks_a_push_window_behind_a_gap_without_refusals(make_group: Any) -> None:
    """1. A group of three (1 MiB data files, parked pushes answered 406 only after 5 s); the
    leader appends 5 entries, all converge. 2. On a connection of its own, push the follower
    entries end+2 .. end+1+WINDOW as the leader would (its term and id, one entry a push, pos
    following on), all at once: entry end+1 is missing, so every push parks.
    3. Push entry end+1.
    Expected: no push is answered with a remoting code other than 200 (no SYSTEM_BUSY); every
    push is answered SUCCESS once the gap is filled, and the follower's log ends at
    end+1+WINDOW."""
    big = {"data_file_size": 1 << 20, "index_file_size": 1 << 16, "max_push_timeout_ms": 5000}
    g: Group = await make_group(**dict.fromkeys(IDS, big))
    leader = await g.wait_leader()
    for i in range(5):
        async with asyncio.timeout(10):
            await leader.append(f"entry-{i}".encode(), patch=False)
    follower = next(m for m in g.members.values() if m is not leader)
    end = leader.store.ledger_end_index
    await wait_until(lambda: follower.store.ledger_end_index == end, 10)
    term, pos = follower.term, follower.store.write_pos
    entries = []
    for k in range(WINDOW + 1):
        entry = DLedgerEntry(index=end + 1 + k, term=term, pos=pos, body=b"w%07d" % k)
        entries.append(entry)
        pos += entry.size

    def push(entry: DLedgerEntry) -> RemotingCommand:
        body = PushEntryRequest(
            group=leader.config.group, remote_id=follower.config.self_id,
            local_id=leader.config.self_id, leader_id=leader.config.self_id, term=term,
            type=PushType.APPEND, entry=entry, commit_index=end,
        )  # fmt: skip
        return RemotingCommand.request(DLedgerRequestCode.PUSH, None, encode_body(body))

    client = RemotingClient(name="test-pusher")
    try:
        async with asyncio.timeout(20):
            conn = await client.connection(follower.config.self_address)
            behind = [conn.invoke_future(push(e), 15.0) for e in entries[1:]]
            await asyncio.sleep(0.2)  # all of them read and parked (or refused)
            refused = [f.result().code for f in behind if f.done() and f.result().code != 200]
            assert refused == []
            replies = [await conn.invoke_future(push(entries[0]), 15.0)]
            replies += [await f for f in behind]
    finally:
        await client.close()
    assert {r.code for r in replies} == {200}
    codes = {decode_body(r.body or b"", PushEntryResponse).code for r in replies}
    assert codes == {DLedgerResponseCode.SUCCESS}
    assert follower.store.ledger_end_index == end + 1 + WINDOW
