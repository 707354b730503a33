"""NOTIFY_BROKER_ROLE_CHANGED (1008) and GET_BROKER_EPOCH_CACHE (1007): the controller-mode
admin requests.

Owns: decoding the notification (header ``masterAddress``, ``masterBrokerId``, ``masterEpoch``,
``syncStateSetEpoch``; body ``SyncStateSet``) and the ``EpochEntryCache`` JSON body. Must not:
decide the role change (``ReplicasManager.change_broker_role``). Mirrors
``AdminBrokerProcessor.notifyBrokerRoleChanged`` / ``getBrokerEpochCache`` (controller.md section
8) and ``remoting/.../protocol/EpochEntryCache``.

``EpochEntryCache`` body (fastjson, keys sorted)::

    {"brokerId":0,"brokerName":"broker-a","clusterName":"DefaultCluster",
     "epochList":[{"endOffset":9223372036854775807,"epoch":1,"startOffset":0}],"maxOffset":120}

Decided: ``epochList`` is the epoch file as held (the last entry's end is ``Long.MAX_VALUE``),
what upstream's ``getEpochEntries`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from rocketpy.broker.controller_api import MasterInfo
from rocketpy.broker.replicas_manager import ReplicasManager
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean
from rocketpy.remoting.protocol.bodies.controller import SyncStateSet, decode_sync_state_set
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext
from rocketpy.remoting.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
from rocketpy.remoting.transport.dispatch import Processor, RequestContext
from rocketpy.store.epoch_entries import EpochEntry

log = structlog.get_logger(__name__)


def encode_epoch_entry_cache(
    *,
    cluster_name: str,
    broker_name: str,
    broker_id: int,
    entries: tuple[EpochEntry, ...],
    max_offset: int,
) -> bytes:
    """The ``EpochEntryCache`` JSON body."""
    return fastjson.dumps(
        Bean(
            brokerId=broker_id,
            brokerName=broker_name,
            clusterName=cluster_name,
            epochList=[
                Bean(endOffset=e.end_offset, epoch=e.epoch, startOffset=e.start_offset)
                for e in entries
            ],
            maxOffset=max_offset,
        )
    ).encode("utf-8")


class RoleChangeProcessor:
    """The two controller-mode requests a broker serves."""

    def __init__(self, replicas: ReplicasManager, max_offset: Callable[[], int]) -> None:
        """Args: ``replicas`` the broker's ReplicasManager; ``max_offset`` the commit log end."""
        self._replicas = replicas
        self._max_offset = max_offset

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: self.notify_broker_role_changed,
            RequestCode.GET_BROKER_EPOCH_CACHE: self.get_broker_epoch_cache,
        }

    async def notify_broker_role_changed(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """Apply a role change the controller pushed (oneway: no response)."""
        del ctx
        header = from_ext(NotifyBrokerRoleChangedRequestHeader, request.ext_fields)
        members = SyncStateSet()
        if request.body:
            try:
                members = decode_sync_state_set(request.body)
            except CodecError as e:
                log.warning("bad SyncStateSet in role change notification", error=str(e))
        info = MasterInfo(
            master_broker_id=header.master_broker_id,
            master_address=header.master_address,
            master_epoch=header.master_epoch or 0,
            sync_state_set_epoch=header.sync_state_set_epoch or members.sync_state_set_epoch,
            sync_state_set=members.sync_state_set,
        )
        await self._replicas.on_notify_role_changed(info)
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS)

    async def get_broker_epoch_cache(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """This broker's epoch entries and max offset (``getBrokerEpochCache``)."""
        del ctx
        rm = self._replicas
        body = encode_epoch_entry_cache(
            cluster_name=rm.config.broker_cluster_name,
            broker_name=rm.config.broker_name,
            broker_id=rm.route_broker_id,
            entries=rm.epochs.entries(),
            max_offset=self._max_offset(),
        )
        return request.make_response(ResponseCode.SUCCESS, body=body)
