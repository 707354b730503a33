"""Brokers in controller mode against three real mqcontroller processes (issue 7 section 1).

Scenarios R-01 (persistent ids), B-01 (start-up: fenced, master registers as brokerId 0) and
B-02 (failover, old master rejoins as slave). The first tests run the controllers with
``enableElectUncleanMaster=true`` (the survivor may come from outside the SyncStateSet); the
AutoSwitch failover test (issue 7 sections 2-3) runs them without it and with
``allAckInSyncStateSet=true``, and checks that no acknowledged message is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import RemotingError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.controller_mode import (
    BROKER_KEYS,
    SAFE_BROKER_KEYS,
    SAFE_CONTROLLER_KEYS,
    broker_addrs,
    commit_log_bytes,
    controller_leader,
    sync_state,
)
from tests.helpers.processes import Daemon, start_broker, start_controllers, start_namesrv

pytestmark = pytest.mark.process

CONTROLLER_KEYS = "enableElectUncleanMaster=true\n"


@contextlib.contextmanager
def _torn_down(
    namesrv: Daemon, controllers: list[Daemon], brokers: dict[str, Daemon]
) -> Iterator[None]:
    """Around a test's body: on failure print the end of each broker's output; either way stop
    the brokers (those in ``brokers`` at the end), the controllers and the NameServer, which
    must exit 0."""
    try:
        yield
    except BaseException:
        for name, d in brokers.items():
            print(f"===== {name}\n{d.output()[-8000:]}")
        raise
    finally:
        for d in brokers.values():
            d.stop()
        for d in controllers:
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()


TOPIC = "CtlModeTopic"


def _identity(store: Path) -> str:
    return (store / "brokerIdentity").read_text(encoding="utf-8")


async def _wait_addrs(ns: str, want: dict[int, str], timeout_s: float) -> float:
    """Wait until the NameServer's broker-a addresses are ``want``; return the seconds taken."""
    began = time.monotonic()
    async with asyncio.timeout(timeout_s):
        while (got := await broker_addrs(ns)) != want:
            del got
            await asyncio.sleep(0.05)
    return time.monotonic() - began


async def _wait_failover(ns: str, survivors: dict[int, str], timeout_s: float) -> tuple[float, str]:
    """Wait until one survivor is brokerId 0 and the other keeps its id; return the seconds
    taken and the new master's address."""
    began = time.monotonic()
    async with asyncio.timeout(timeout_s):
        while True:
            got = await broker_addrs(ns)
            for sid, addr in survivors.items():
                rest = {k: v for k, v in survivors.items() if k != sid}
                if got == {0: addr, **rest}:
                    return time.monotonic() - began, addr
            await asyncio.sleep(0.05)


async def _wait_until_listed(ns: str, broker_id: int, addr: str, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while (await broker_addrs(ns)).get(broker_id) != addr:
            await asyncio.sleep(0.05)


async def _controller_leader(controllers: list[str]) -> str:
    client = RemotingClient(name="test")
    try:
        request = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO, None)
        resp = await client.invoke(controllers[0], request, 5)
    finally:
        await client.close()
    leader = resp.ext("controllerLeaderAddress")
    assert leader is not None, resp.ext_fields
    assert leader in controllers, resp.ext_fields
    return leader


async def _epochs(addr: str) -> list[int]:
    client = RemotingClient(name="test")
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE, None)
        resp = await client.invoke(addr, request, 5)
    finally:
        await client.close()
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return [e["epoch"] for e in fastjson.loads(resp.body or b"{}")["epochList"]]


async def _send(addr: str) -> int:
    client = JavaLikeClient()
    try:
        return (await client.send(addr, TOPIC, b"hello")).code
    finally:
        await client.close()


async def _send_until_ok(addr: str, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while await _send(addr) != ResponseCode.SUCCESS:
            await asyncio.sleep(0.05)


def _start(
    tmp: Path, ns: str, tag: str, controllers: list[str], keys: str = ""
) -> tuple[Daemon, str]:
    extra = BROKER_KEYS + keys + f"controllerAddr={';'.join(controllers)}\n"
    return start_broker(tmp, ns, extra=extra, tag=tag, store=tmp / tag)


def test_controller_mode_failover_and_rejoin(tmp_path: Path) -> None:
    """1. Start mqnamesrv, three mqcontrollers (unclean election on) and brokers b1, b2, b3 of
    broker-a in controller mode, in that order.
    2. Check: identity files hold ids 1, 2, 3; the NameServer shows b1 as brokerId 0 and the
    others under their ids; b1 accepts a send, b2 refuses it; b1's epoch file holds epoch 1.
    3. SIGKILL b1. Expected: within 5 s the NameServer shows one survivor as brokerId 0 and the
    other under its id; the new master accepts a send and its epoch file ends with epoch 2
    (epoch 1 is there too once it replicated b1's message).
    4. SIGKILL the controller leader, then restart b1 on its store. Expected: b1 finds the new
    controller leader, keeps id 1 (no temp file left) and rejoins as a slave: the NameServer
    lists it as brokerId 1 beside the new master; it refuses sends."""
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {}
    ctl_daemons, ctl_addrs, _ = start_controllers(tmp_path, 3, CONTROLLER_KEYS)
    with _torn_down(namesrv, ctl_daemons, daemons):
        addrs = {}
        for tag in ("b1", "b2", "b3"):
            daemons[tag], addrs[tag] = _start(tmp_path, ns, tag, ctl_addrs)
        b1, b2, b3 = addrs["b1"], addrs["b2"], addrs["b3"]
        asyncio.run(_wait_addrs(ns, {0: b1, 2: b2, 3: b3}, 15))
        for i, tag in enumerate(("b1", "b2", "b3"), start=1):
            assert _identity(tmp_path / tag) == f"DefaultCluster#broker-a#{i}"
        assert asyncio.run(_send(b1)) == ResponseCode.SUCCESS
        assert asyncio.run(_send(b2)) != ResponseCode.SUCCESS
        assert asyncio.run(_epochs(b1)) == [1]

        killed = daemons.pop("b1")
        killed.proc.kill()
        killed.stop()  # reaps the process and closes its pipes
        took, new_master = asyncio.run(_wait_failover(ns, {2: b2, 3: b3}, 10))
        assert took < 5.0, f"failover took {took:.1f} s"
        asyncio.run(_send_until_ok(new_master, 5))
        assert asyncio.run(_epochs(new_master))[-1] == 2

        leader = asyncio.run(_controller_leader(ctl_addrs))
        dead_ctl = ctl_daemons.pop(ctl_addrs.index(leader))
        dead_ctl.proc.kill()
        dead_ctl.stop()
        daemons["b1"], b1_again = _start(tmp_path, ns, "b1", ctl_addrs)
        asyncio.run(_wait_until_listed(ns, 1, b1_again, 10))
        listed = asyncio.run(broker_addrs(ns))
        assert listed[0] == new_master, listed
        assert _identity(tmp_path / "b1") == "DefaultCluster#broker-a#1"
        assert not (tmp_path / "b1" / "brokerIdentity-temp").exists()
        assert asyncio.run(_send(b1_again)) != ResponseCode.SUCCESS


async def _never_steals_id_0(ns: str, master: str, back: str, timeout_s: float) -> None:
    """Poll until ``back`` is listed as brokerId 1; every poll must show ``master`` as 0."""
    async with asyncio.timeout(timeout_s):
        while True:
            got = await broker_addrs(ns)
            assert got.get(0) == master, got
            if got.get(1) == back:
                return
            await asyncio.sleep(0.05)


def test_controller_mode_paused_master_is_replaced_and_demoted(tmp_path: Path) -> None:
    """Network cut by SIGSTOP (issue 7 tests; NameServer stateVersion, namesrv.md section 3):
    1. Start mqnamesrv, three mqcontrollers (unclean election on), b1 (master) and b2.
    2. SIGSTOP b1. Expected: its heartbeats expire (1.5 s) and the NameServer shows b2 as
    brokerId 0 within 5 s.
    3. SIGCONT b1: it still believes it is master of epoch 1. Expected: its stale registration
    (stateVersion 1) never displaces b2 (stateVersion 2) as brokerId 0; its replica-info sync
    learns epoch 2 and it re-registers as slave brokerId 1 and refuses sends."""
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {}
    ctl_daemons, ctl_addrs, _ = start_controllers(tmp_path, 3, CONTROLLER_KEYS)
    with _torn_down(namesrv, ctl_daemons, daemons):
        daemons["b1"], b1 = _start(tmp_path, ns, "b1", ctl_addrs)
        daemons["b2"], b2 = _start(tmp_path, ns, "b2", ctl_addrs)
        asyncio.run(_wait_addrs(ns, {0: b1, 2: b2}, 15))
        daemons["b1"].proc.send_signal(signal.SIGSTOP)
        try:
            took = asyncio.run(_wait_addrs(ns, {0: b2}, 10))
        finally:
            daemons["b1"].proc.send_signal(signal.SIGCONT)
        assert took < 5.0, f"failover took {took:.1f} s"
        asyncio.run(_never_steals_id_0(ns, b2, b1, 10))
        assert asyncio.run(_send(b1)) != ResponseCode.SUCCESS
        asyncio.run(_send_until_ok(b2, 5))


QUEUES = 4


async def _wait_sync_state(
    controllers: list[str], want: frozenset[int], timeout_s: float
) -> tuple[int | None, int, frozenset[int]]:
    async with asyncio.timeout(timeout_s):
        while True:
            with contextlib.suppress(RemotingError):
                got = await sync_state(controllers)
                if got[2] == want:
                    return got
            await asyncio.sleep(0.1)


async def _wait_commit_log(store: Path, want: bytes, timeout_s: float) -> None:
    """Until ``store``'s commit log is ``want`` (a replica that received nothing yet has none)."""
    async with asyncio.timeout(timeout_s):
        while True:
            with contextlib.suppress(FileNotFoundError):
                if commit_log_bytes(store) == want:
                    return
            await asyncio.sleep(0.1)


async def _create_topic(addrs: list[str]) -> None:
    """The topic on every replica (slaves do not sync topic configs from the master yet)."""
    admin = AdminClient("127.0.0.1:1")
    try:
        for addr in addrs:
            await admin.create_topic(
                addr, TopicSpec(topic=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            )
    finally:
        await admin.close()


async def _send_numbered(addr: str, count: int) -> dict[int, list[bytes]]:
    """Send ``count`` messages round-robin over the queues; return the SEND_OK bodies per
    queue, in send order (one producer, so queue order is send order)."""
    client = JavaLikeClient()
    acked: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}
    try:
        for i in range(count):
            body = f"msg-{i:05d}".encode()
            resp = await client.send(addr, TOPIC, body, queue_id=i % QUEUES)
            assert resp.code == ResponseCode.SUCCESS, (i, resp.code, resp.remark)
            acked[i % QUEUES].append(body)
    finally:
        await client.close()
    return acked


async def _read_queues(addr: str, want: dict[int, int], timeout_s: float) -> dict[int, list[bytes]]:
    """Pull every queue from offset 0 until ``want[q]`` messages were read from it."""
    client = JavaLikeClient()
    got: dict[int, list[bytes]] = {q: [] for q in want}
    try:
        async with asyncio.timeout(timeout_s):
            for q, count in want.items():
                offset = 0
                while len(got[q]) < count:
                    resp = await client.pull(
                        addr, "reader", TOPIC, offset, queue_id=q, expression="*", suspend_ms=500
                    )
                    if resp.code == ResponseCode.SUCCESS and resp.body is not None:
                        got[q].extend(m.body for m in decode_records(resp.body))
                    offset = int(resp.ext("nextBeginOffset") or offset)
    finally:
        await client.close()
    return got


def test_controller_mode_autoswitch_failover_keeps_acknowledged(tmp_path: Path) -> None:
    """Issue 7 sections 2-3, scenario B-02 without unclean election:
    1. Start mqnamesrv, three mqcontrollers (enableElectUncleanMaster=false) and b1, b2, b3 of
    broker-a in controller mode with allAckInSyncStateSet=true.
    2. Expected: the slaves replicate over AutoSwitch HA and the controller's SyncStateSet
    grows to {1, 2, 3}.
    3. Send 200 messages to b1 over 4 queues. Expected: every send is SEND_OK.
    4. SIGSTOP b2 and b3, send one more message to b1. Expected: FLUSH_SLAVE_TIMEOUT (the send
    path waits for every SyncStateSet member's ack, none comes within slaveTimeout). The
    bytes still sit in the paused slaves' socket buffers, so they may replicate it later.
    5. SIGKILL b1, SIGCONT b2 and b3. Expected: within 5 s the controller names b2 or b3
    master of epoch 2 (it could not be elected otherwise: unclean election is off) and the
    NameServer lists it as brokerId 0.
    6. Pull every queue from the new master. Expected: every acknowledged message, each queue
    in send order.
    7. Restart b1 on its store. Expected: it rejoins as slave brokerId 1 and the SyncStateSet
    grows back to {1, 2, 3}.
    8. Send 50 more messages to the new master. Expected: all SEND_OK (each needs b1's ack
    now); b1's commit log is the new master's byte for byte and both epoch histories are
    [1, 2].
    """
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {}
    ctl_daemons, ctl_addrs, _ = start_controllers(tmp_path, 3, SAFE_CONTROLLER_KEYS)
    with _torn_down(namesrv, ctl_daemons, daemons):
        addrs = {}
        for tag in ("b1", "b2", "b3"):
            daemons[tag], addrs[tag] = _start(tmp_path, ns, tag, ctl_addrs, SAFE_BROKER_KEYS)
        asyncio.run(_wait_addrs(ns, {0: addrs["b1"], 2: addrs["b2"], 3: addrs["b3"]}, 15))
        master, epoch, _ = asyncio.run(_wait_sync_state(ctl_addrs, frozenset({1, 2, 3}), 20))
        assert (master, epoch) == (1, 1)
        asyncio.run(_create_topic(list(addrs.values())))
        acked = asyncio.run(_send_numbered(addrs["b1"], 200))
        for tag in ("b2", "b3"):
            daemons[tag].proc.send_signal(signal.SIGSTOP)
        try:
            assert asyncio.run(_send(addrs["b1"])) == ResponseCode.FLUSH_SLAVE_TIMEOUT
            killed = daemons.pop("b1")
            killed.proc.kill()
            killed.stop()
        finally:
            for tag in ("b2", "b3"):
                daemons[tag].proc.send_signal(signal.SIGCONT)
        took, new_master = asyncio.run(_wait_failover(ns, {2: addrs["b2"], 3: addrs["b3"]}, 10))
        assert took < 5.0, f"failover took {took:.1f} s"
        master, epoch, _ = asyncio.run(sync_state(ctl_addrs))
        assert master in (2, 3)
        assert epoch == 2
        assert new_master == addrs[f"b{master}"]
        got = asyncio.run(_read_queues(new_master, {q: len(v) for q, v in acked.items()}, 20))
        for q, bodies in acked.items():
            assert got[q][: len(bodies)] == bodies, f"queue {q}"

        daemons["b1"], b1_again = _start(tmp_path, ns, "b1", ctl_addrs, SAFE_BROKER_KEYS)
        asyncio.run(_wait_until_listed(ns, 1, b1_again, 10))
        asyncio.run(_wait_sync_state(ctl_addrs, frozenset({1, 2, 3}), 20))
        asyncio.run(_send_numbered(new_master, 50))
        master_log = commit_log_bytes(tmp_path / f"b{master}")
        asyncio.run(_wait_commit_log(tmp_path / "b1", master_log, 10))
        assert asyncio.run(_epochs(b1_again)) == asyncio.run(_epochs(new_master)) == [1, 2]


def test_controller_mode_slaves_follow_a_master_restarted_on_another_port(tmp_path: Path) -> None:
    """A master that restarts on another address while nobody elects stays master in the same
    epoch, and no role change is sent: its slaves must follow it anyway. (A new controller
    leader elects nobody for one heartbeat timeout, controller/heartbeat.py; a master whose
    machine restarts with a new address inside its heartbeat timeout is the same case.)
    1. Start mqnamesrv, three mqcontrollers and b1, b2, b3 of broker-a (allAck; heartbeat
    timeout 10 s); wait for SyncStateSet {1, 2, 3}.
    2. SIGKILL the controller leader; once another leads, SIGTERM b1 (the master) and start it
    again on its store: its remoting and HA ports are new (port 0).
    Expected: the controller still names b1 master of epoch 1; within 15 s the NameServer lists
    its new address as brokerId 0 and the SyncStateSet is {1, 2, 3} again (the slaves took the
    moved master's address from the controller, then its HA address from the NameServer); sends
    to it are SEND_OK and both slaves' commit logs become the master's byte for byte. Before
    the fix the slaves kept waiting for the NameServer to list the old address and never
    replicated from the restarted master."""
    keys = SAFE_BROKER_KEYS + "controllerHeartBeatTimeoutMills=10000\n"
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {}
    ctl_daemons, ctl_addrs, _ = start_controllers(tmp_path, 3, SAFE_CONTROLLER_KEYS)
    with _torn_down(namesrv, ctl_daemons, daemons):
        addrs = {}
        for tag in ("b1", "b2", "b3"):
            daemons[tag], addrs[tag] = _start(tmp_path, ns, tag, ctl_addrs, keys)
        asyncio.run(_wait_sync_state(ctl_addrs, frozenset({1, 2, 3}), 20))
        asyncio.run(_create_topic(list(addrs.values())))
        leader = asyncio.run(_controller_leader(ctl_addrs))
        ctl_daemons[ctl_addrs.index(leader)].proc.kill()
        rest = [a for a in ctl_addrs if a != leader]
        asyncio.run(_wait_controller_leader(rest, 10))
        assert daemons.pop("b1").stop() == 0
        daemons["b1"], moved = _start(tmp_path, ns, "b1", ctl_addrs, keys)
        assert moved != addrs["b1"]
        asyncio.run(_wait_until_listed(ns, 0, moved, 15))
        master, epoch, _ = asyncio.run(_wait_sync_state(rest, frozenset({1, 2, 3}), 15))
        assert (master, epoch) == (1, 1)
        asyncio.run(_send_until_ok(moved, 10))
        asyncio.run(_send_numbered(moved, 20))
        for tag in ("b2", "b3"):  # they replicate from the moved master again
            asyncio.run(_wait_commit_log(tmp_path / tag, commit_log_bytes(tmp_path / "b1"), 15))
        asyncio.run(_wait_sync_state(rest, frozenset({1, 2, 3}), 15))


async def _wait_controller_leader(controllers: list[str], timeout_s: float) -> str:
    """Until one of ``controllers`` names a leader among them; its address."""
    async with asyncio.timeout(timeout_s):
        while (leader := await controller_leader(controllers)) not in controllers:
            await asyncio.sleep(0.1)
    assert leader is not None
    return leader
