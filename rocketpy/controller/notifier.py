"""NOTIFY_BROKER_ROLE_CHANGED (1008): tell every live replica who the new master is.

Owns: :class:`RoleChangeNotifier`: after a successful election, one oneway request per alive
replica address (3 s connect/send budget, no retry), at most one in flight per address, a
notification with a higher master epoch replacing a pending older one (controller.md section 8).
Must not: decide who is alive (the caller passes a predicate) or block the request path.
Mirrors ``ControllerManager.notifyBrokerRoleChanged`` / ``BrokerHousekeepingService``'s
notify executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.codes import RequestCode
from rocketpy.common.errors import RemotingError
from rocketpy.remoting.protocol.bodies.controller import (
    SyncStateSet,
    decode_elect_master_body,
    encode_body,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.controller import (
    ElectMasterResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
)
from rocketpy.remoting.transport.client import RemotingClient

log = structlog.get_logger(__name__)

SEND_TIMEOUT_S = 3.0
#: (broker id, address) -> alive?
IsAlive = Callable[[str, str, int], bool]


class RoleChangeNotifier:
    """Sends role-change notifications on its own client connections."""

    def __init__(self) -> None:
        self._client = RemotingClient(connect_timeout_s=SEND_TIMEOUT_S, name="controller-notify")
        self._tasks = TaskSet("controller/notify")
        self._pending: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self.sent = 0

    def notify(
        self, header: ElectMasterResponseHeader, body: bytes | None, is_alive: IsAlive
    ) -> None:
        """Notify every alive replica of the elected broker-set (body ``brokerMemberGroup``)."""
        if not body or header.master_broker_id is None:
            return
        elected = decode_elect_master_body(body)
        group = elected.broker_member_group
        if group is None:
            return
        notify = NotifyBrokerRoleChangedRequestHeader(
            master_address=header.master_address,
            master_epoch=header.master_epoch,
            sync_state_set_epoch=header.sync_state_set_epoch,
            master_broker_id=header.master_broker_id,
        )
        sync = encode_body(
            SyncStateSet(
                sync_state_set=frozenset({header.master_broker_id}),
                sync_state_set_epoch=header.sync_state_set_epoch or 0,
            )
        )
        epoch = header.master_epoch or 0
        for broker_id, addr in sorted(group.broker_addrs.items()):
            if not is_alive(group.cluster, group.broker_name, broker_id):
                continue
            old = self._pending.get(addr)
            if old is not None:
                if old[0] > epoch:
                    continue
                old[1].cancel()
            task = self._tasks.spawn(self._send(addr, notify, sync), name=f"notify/{addr}")
            self._pending[addr] = (epoch, task)
            task.add_done_callback(functools.partial(self._forget, addr))

    def _forget(self, addr: str, task: asyncio.Task[None]) -> None:
        current = self._pending.get(addr)
        if current is not None and current[1] is task:
            del self._pending[addr]

    async def _send(
        self, addr: str, header: NotifyBrokerRoleChangedRequestHeader, body: bytes
    ) -> None:
        request = RemotingCommand.request(
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED, to_ext(header), body, oneway=True
        )
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                await self._client.invoke_oneway(addr, request)
        except (RemotingError, TimeoutError, OSError) as e:
            log.warning("notify broker role changed failed", addr=addr, error=repr(e))
            return
        self.sent += 1
        log.info(
            "notify broker role changed",
            addr=addr,
            master=header.master_broker_id,
            master_epoch=header.master_epoch,
        )

    async def close(self) -> None:
        """Cancel pending notifications and close connections (idempotent)."""
        await self._tasks.cancel_all()
        self._pending.clear()
        with contextlib.suppress(RemotingError, OSError):
            await self._client.close()
