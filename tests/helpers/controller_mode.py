"""Queries shared by the controller-mode process and chaos tests: what the NameServer lists for
broker-a, what the controller group holds (leader, SyncStateSet) and a store's CommitLog bytes.

Each query opens its own client and closes it; every call has a deadline.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rocketpy.client.admin import AdminClient
from rocketpy.client.controller_admin import ControllerAdminClient
from rocketpy.common.errors import RemotingError

BROKER_NAME = "broker-a"
# Controller mode with test timings: heartbeats every 200 ms expire after 1.5 s.
BROKER_KEYS = (
    "enableControllerMode=true\nbrokerHeartbeatInterval=200\ncontrollerHeartBeatTimeoutMills=1500\n"
    "syncBrokerMetadataPeriod=500\ncheckSyncStateSetPeriod=500\nsyncControllerMetadataPeriod=1000\n"
    "haListenPort=0\n"
)
# No acknowledged loss: SEND_OK waits for every SyncStateSet member, and the controller elects
# only from the SyncStateSet.
SAFE_CONTROLLER_KEYS = "enableElectUncleanMaster=false\n"
SAFE_BROKER_KEYS = (
    "allAckInSyncStateSet=true\nhaSendHeartbeatInterval=300\nhaReconnectInterval=200\n"
    "slaveTimeout=1000\n"
)


async def broker_addrs(ns: str) -> dict[int, str]:
    """broker-a's ``brokerId -> address`` as the NameServer lists it."""
    admin = AdminClient(ns)
    try:
        info = await admin.cluster_info()
    finally:
        await admin.close()
    found = info.brokers.get(BROKER_NAME)
    return dict(found.broker_addrs) if found else {}


async def sync_state(controllers: list[str]) -> tuple[int | None, int, frozenset[int]]:
    """broker-a's (master id, master epoch, SyncStateSet ids), asked of the first controller in
    ``controllers`` that answers (each forwards to the leader).

    Raises:
        RemotingError: no controller answered.
    """
    failure: RemotingError | None = None
    for addr in controllers:
        admin = ControllerAdminClient(timeout_s=1.0)
        try:
            info = await admin.sync_state_data(addr, [BROKER_NAME])
        except RemotingError as e:
            failure = e
            continue
        finally:
            await admin.close()
        found = info.replicas_info_table[BROKER_NAME]
        members = frozenset(r.broker_id for r in found.in_sync_replicas)
        return found.master_broker_id, found.master_epoch, members
    assert failure is not None
    raise failure


async def controller_leader(controllers: list[str]) -> str | None:
    """The leader's address as the first answering controller knows it, or None."""
    for addr in controllers:
        admin = ControllerAdminClient(timeout_s=1.0)
        try:
            with contextlib.suppress(RemotingError):
                leader = (await admin.metadata(addr)).controller_leader_address
                if leader:
                    return leader
        finally:
            await admin.close()
    return None


_CHUNK = 1 << 20


def commit_log_bytes(store: Path) -> bytes:
    """A store's CommitLog bytes up to the last non-zero byte (files are preallocated with
    zeros; a record never ends with one: its properties end with the 0x02 separator). Each
    file is read up to its first all-zero MiB (what follows is zeros: records are appended in
    order), so 1 GiB segments cost what they hold."""
    files = sorted(p for p in (store / "commitlog").iterdir() if p.name.isdigit())
    parts: list[bytes] = []
    zeros = bytes(_CHUNK)
    for i, path in enumerate(files):
        read = 0
        with path.open("rb") as f:
            while (chunk := f.read(_CHUNK)) and chunk != zeros[: len(chunk)]:
                parts.append(chunk)
                read += len(chunk)
        if i < len(files) - 1:
            parts.append(bytes(path.stat().st_size - read))  # the zeros up to the next file
    return b"".join(parts).rstrip(b"\0")
