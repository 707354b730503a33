"""SIGKILL the leader of a 3-process DLedger group: a new leader within seconds, every
acknowledged APPEND survives, the killed member rejoins as a follower and the replicas end
byte-identical. Appends are real message records sent through the APPEND code of the peer port."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    MetadataRequest,
    MetadataResponse,
    decode_body,
    encode_body,
)
from rocketpy.dledger.transport import DLedgerRequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.store.dledger_log.entry import BODY_OFFSET, INDEX_UNIT_SIZE
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig
from tests.helpers.dledger_member import IDS, free_ports
from tests.helpers.dledger_member_child import config

pytestmark = pytest.mark.integration

CHILD = Path(__file__).parents[2] / "helpers" / "dledger_member_child.py"
G = "RaftNode00"


class Proc:
    def __init__(self, root: Path, self_id: str, peers: str) -> None:
        self.args = (str(root), self_id, peers)
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        log = (Path(self.args[0]) / f"{self.args[1]}.log").open("ab")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, str(CHILD), *self.args, stdout=asyncio.subprocess.PIPE, stderr=log
            )
        finally:
            log.close()
        assert self.proc.stdout is not None
        async with asyncio.timeout(20):
            assert (await self.proc.stdout.readline()).strip() == b"ready"

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        async with asyncio.timeout(10):
            await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(15):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def _call(client: RemotingClient, addr: str, code: int, body: object, kind: type) -> object:
    req = RemotingCommand.request(code, None, encode_body(body))  # type: ignore[arg-type]
    reply = await client.invoke(addr, req, 3.0)
    assert reply.code == 200
    assert reply.body
    return decode_body(reply.body, kind)


async def _leader(client: RemotingClient, peers: dict[str, str], live: set[str]) -> str:
    async with asyncio.timeout(15):
        while True:
            seen = set()
            for i in live:
                try:
                    meta = await _call(
                        client, peers[i], DLedgerRequestCode.METADATA,
                        MetadataRequest(group=G, remote_id=i), MetadataResponse,
                    )  # fmt: skip
                except Exception:  # noqa: BLE001 - a member still starting
                    seen.add(None)
                    continue
                assert isinstance(meta, MetadataResponse)
                seen.add(meta.leader_id)
            if len(seen) == 1 and (leader := next(iter(seen))) in live:
                return leader
            await asyncio.sleep(0.05)


def _record(i: int) -> bytes:
    return encode_record(MessageRecord(topic="DLedgerKill", queue_id=0, body=f"m{i}".encode() * 9))


async def _append(client: RemotingClient, addr: str, lid: str, i: int) -> AppendEntryResponse:
    resp = await _call(
        client, addr, DLedgerRequestCode.APPEND,
        AppendEntryRequest(group=G, remote_id=lid, body=_record(i)), AppendEntryResponse,
    )  # fmt: skip
    assert isinstance(resp, AppendEntryResponse)
    return resp


def _files(d: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(d.iterdir()) if p.is_file())


async def test_sigkill_leader(tmp_path: Path) -> None:
    ports = free_ports(3)
    peer_map = {i: f"127.0.0.1:{p}" for i, p in zip(IDS, ports, strict=True)}
    peers = ";".join(f"{i}-{a}" for i, a in peer_map.items())
    procs = {i: Proc(tmp_path, i, peers) for i in IDS}
    client = RemotingClient(name="test-kill")
    acked: dict[int, int] = {}  # index -> i
    try:
        for p in procs.values():
            await p.start()
        live = set(IDS)
        lid = await _leader(client, peer_map, live)
        for i in range(40):
            r = await _append(client, peer_map[lid], lid, i)
            assert r.code == 200, r
            acked[r.index] = i
        await procs[lid].kill()
        live.discard(lid)
        killed = lid
        lid = await _leader(client, peer_map, live)
        assert lid != killed
        for i in range(40, 60):
            r = await _append(client, peer_map[lid], lid, i)
            assert r.code == 200, r
            acked[r.index] = i
        await procs[killed].start()
        live.add(killed)
        assert await _leader(client, peer_map, live) == lid
        await asyncio.sleep(1.5)  # the killed member catches up; a COMMIT push follows
    finally:
        await client.close()
        for p in procs.values():
            await p.stop()
    stores = {}
    for i in IDS:
        store = DLedgerLogStore(
            DLedgerStoreConfig(
                base_dir=config(tmp_path, i, peers).base_dir,
                data_file_size=64 * 1024,
                index_file_size=32 * 1024,
            )
        )
        await asyncio.to_thread(store.load)
        stores[i] = store
    try:
        ends = {s.ledger_end_index for s in stores.values()}
        assert ends == {max(acked)}
        ref = stores[lid]
        for index, i in acked.items():
            entry = ref.get(index)
            rec = decode_record(entry.body)
            assert rec.body == f"m{i}".encode() * 9
            assert rec.physical_offset == entry.pos + BODY_OFFSET
        end = max(acked)
        for s in stores.values():
            assert s.committed_index <= s.ledger_end_index
            for index in range(end + 1):
                assert s.get(index) == ref.get(index)
            assert s.write_pos == ref.write_pos
        data = {i: _files(s.base_dir / "data") for i, s in stores.items()}
        index = {i: _files(s.base_dir / "index") for i, s in stores.items()}
        pos, n = ref.write_pos, (end + 1) * INDEX_UNIT_SIZE
        assert len({d[:pos] for d in data.values()}) == 1
        assert len({x[:n] for x in index.values()}) == 1
    finally:
        for s in stores.values():
            s.close()
