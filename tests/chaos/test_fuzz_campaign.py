"""The fuzz campaign (issue 25, item 6): >= 10^6 hostile frames against the NameServer, a broker's
remoting port, a controller and a controller-mode master's HA port; no crash, no traceback, RSS
bounded, and every daemon still does its job afterwards.

``FUZZ_FRAMES`` (default 1,000,000) is split evenly across the four targets; ``FUZZ_SEED``
(default 25) replays a run. ``make fuzz`` runs this file.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.client.controller_admin import ControllerAdminClient
from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records, subscription
from tests.helpers.controller_mode import BROKER_KEYS, broker_addrs, controller_leader
from tests.helpers.fuzz_campaign import (
    Target,
    ha_port,
    log_tracebacks,
    rss,
    rss_bound_mb,
    run_fuzz,
    tracebacks,
)
from tests.helpers.processes import Daemon, start_broker, start_controllers, start_namesrv

pytestmark = pytest.mark.chaos

TOPIC = "FuzzTopic"
FRAMES = int(os.environ.get("FUZZ_FRAMES", "1000000"))
SEED = int(os.environ.get("FUZZ_SEED", "25"))


async def _wait_pair(ns: str, timeout_s: float) -> dict[int, str]:
    """broker-a's master (id 0) and one slave, as the NameServer lists them."""
    async with asyncio.timeout(timeout_s):
        while len(addrs := await broker_addrs(ns)) < 2 or 0 not in addrs:
            await asyncio.sleep(0.1)
    return addrs


async def _create_topic(ns: str, addrs: list[str]) -> None:
    admin = AdminClient(ns)
    try:
        for addr in addrs:
            await admin.create_topic(
                addr, TopicSpec(topic=TOPIC, read_queue_nums=4, write_queue_nums=4)
            )
    finally:
        await admin.close()


async def _max_offset(addr: str) -> int:
    admin = AdminClient("127.0.0.1:1")
    try:
        return int((await admin.broker_runtime_stats(addr))["commitLogMaxOffset"])
    finally:
        await admin.close()


async def _serves_after(ns: str, master: str, slave: str, controllers: list[str]) -> str:
    """Real requests after the fuzzing: a route query, a send and a pull of that message, the
    controller's metadata, and the slave catching up on the new message. Returns figures."""
    admin = AdminClient(ns)
    try:
        route = await admin.topic_route(TOPIC)
        assert route.brokers, route
    finally:
        await admin.close()
    client = JavaLikeClient()
    try:
        sent = await client.send(master, TOPIC, b"after-fuzz", queue_id=3)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        offset = int(sent.ext("queueOffset") or -1)
        # A consumer heartbeats its group's subscription before it pulls (else code 24).
        beat = await client.heartbeat(master, "FuzzCheckGroup", (subscription(TOPIC),))
        assert beat.code == ResponseCode.SUCCESS, beat.remark
        # Controller mode dispatches to the consume queue only up to the confirm offset (the
        # SyncStateSet's acks): the message becomes pullable once the slave acked it.
        began = time.monotonic()
        async with asyncio.timeout(30):
            while (
                pulled := await client.pull(master, "FuzzCheckGroup", TOPIC, offset, queue_id=3)
            ).code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.1)
        assert [m.body for m in decode_records(pulled.body or b"")][:1] == [b"after-fuzz"]
        pull_s = time.monotonic() - began
    finally:
        await client.close()
    ctl = ControllerAdminClient(timeout_s=5)
    try:
        meta = await ctl.metadata(controllers[0])
        assert meta.controller_leader_address in controllers, meta
    finally:
        await ctl.close()
    top = await _max_offset(master)
    began = time.monotonic()
    async with asyncio.timeout(30):
        while await _max_offset(slave) < top:
            await asyncio.sleep(0.1)
    caught_up = time.monotonic() - began
    return f"message pullable after {pull_s:.1f}s; slave caught up to {top} in {caught_up:.1f}s"


def _check_daemons(daemons: dict[str, Daemon], before: dict[str, float]) -> list[str]:
    lines, failures = [], []
    for name, daemon in daemons.items():
        after = rss(daemon)
        bound = rss_bound_mb(before[name])
        lines.append(f"  {name:12} rss {before[name]:7.1f} -> {after:7.1f} MB (bound {bound:.0f})")
        if daemon.proc.poll() is not None:
            failures.append(f"{name} exited {daemon.proc.returncode}:\n{daemon.tail(3000)}")
        if after > bound:
            failures.append(f"{name} RSS {after:.1f} MB > {bound:.1f} MB")
        failures += [f"{name} traceback:\n{tb}" for tb in tracebacks(daemon)]
    print("\n".join(lines), flush=True)
    return failures


@pytest.mark.timeout(3600)
def test_fuzz_campaign_million_hostile_frames(tmp_path: Path) -> None:
    """1. Start mqnamesrv, three mqcontrollers, and broker-a's master and slave in controller
    mode (the master has an AutoSwitch HA port); create FuzzTopic; record each daemon's RSS.
    2. Fuzz, one after another, the NameServer, the master's remoting port, the controller
    leader and the master's HA port with FUZZ_FRAMES / 4 frames each.
    Expected: each fuzz run reports no violation (every well-formed request answered with its
    own opaque, nothing unasked-for, every fatal frame closed, every control probe and idle
    connection answered); afterwards every daemon is alive, has no traceback in its output and
    an RSS within max(2 x before, before + 200 MB); the NameServer routes FuzzTopic, the master
    stores and serves a new message, the controller answers its metadata and the slave catches
    up on that message."""
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {"namesrv": namesrv}
    try:
        ctl_daemons, controllers, _ = start_controllers(tmp_path, 3)
        daemons.update({f"controller-{i}": d for i, d in enumerate(ctl_daemons)})
        extra = BROKER_KEYS + f"controllerAddr={';'.join(controllers)}\n"
        daemons["master"], _ = start_broker(
            tmp_path, ns, extra=extra, tag="m", store=tmp_path / "m"
        )
        daemons["slave"], _ = start_broker(tmp_path, ns, extra=extra, tag="s", store=tmp_path / "s")
        addrs = asyncio.run(_wait_pair(ns, 30))
        master, slave = addrs[0], next(a for i, a in addrs.items() if i != 0)
        asyncio.run(_create_topic(ns, [master]))
        leader = asyncio.run(controller_leader(controllers))
        assert leader is not None
        host = master.rsplit(":", 1)[0]
        targets = [
            Target("namesrv", ns),
            Target("broker", master, codes="broker",
                   probe_code=RequestCode.GET_BROKER_RUNTIME_INFO),
            Target("controller", leader, codes="controller",
                   probe_code=RequestCode.CONTROLLER_GET_METADATA_INFO),
            Target("ha", f"{host}:{ha_port(daemons['master'])}", kind="ha"),
        ]  # fmt: skip
        before = {name: rss(d) for name, d in daemons.items()}
        results = []
        began = time.monotonic()
        for i, target in enumerate(targets):
            share = FRAMES // len(targets) + (i < FRAMES % len(targets))
            result = run_fuzz(target, share, seed=SEED + i, topic=TOPIC, timeout_s=1500)
            results.append((target.name, result))
            print(f"fuzz {target.name}: " + " ".join(
                f"{k}={result[k]}" for k in ("frames", "connections", "peer_closes", "probes_ok",
                                             "violations", "elapsed_s", "frames_per_s", "answers")
            ), flush=True)  # fmt: skip
        elapsed = time.monotonic() - began
        total = sum(int(str(r["frames"])) for _, r in results)
        print(f"fuzz total: {total} frames in {elapsed:.0f}s ({total / elapsed:.0f} frames/s)")
        failures = [f"{name}: {r['violations']} rc={r['returncode']}\n{r['output']}"
                    for name, r in results if r["violations"] or r["returncode"]]  # fmt: skip
        failures += _check_daemons(daemons, before)
        failures += log_tracebacks(tmp_path)
        assert not failures, "\n".join(failures)
        assert total >= FRAMES
        print(asyncio.run(_serves_after(ns, master, slave, controllers)), flush=True)
    finally:
        for daemon in reversed(list(daemons.values())):
            daemon.stop()
