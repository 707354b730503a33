"""Request processors of a controller node: decode, hand to the pipeline, encode the answer.

Owns: :class:`ControllerRequestProcessor`, one handler per controller request code (904,
1001-1006, 1009-1013). State requests go through :class:`ControllerPipeline` (leader only);
BROKER_HEARTBEAT, CONTROLLER_GET_METADATA_INFO and the config requests are answered by every
node (controller.md section 3). Must not: decide anything itself (``ReplicasInfoManager``)
or send notifications (the service does, through ``on_elected``). Mirrors
``ControllerRequestProcessor``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar, cast

import structlog

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.heartbeat import BrokerHeartbeatManager
from rocketpy.controller.metrics import ControllerMetrics
from rocketpy.controller.pipeline import ControllerPipeline
from rocketpy.controller.state.replicas_info import ControllerResult, ReplicasInfoManager
from rocketpy.remoting.protocol.bodies.controller import (
    decode_broker_names,
    decode_sync_state_set,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers import controller as h
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.transport.config_requests import config_response, update_config
from rocketpy.remoting.transport.dispatch import Processor, ProcessorRegistry, RequestContext

log = structlog.get_logger(__name__)

H = TypeVar("H")
Response = RemotingCommand | None
#: Called after a SUCCESS election with its response header and body (to notify brokers).
OnElected = Callable[[h.ElectMasterResponseHeader, bytes | None], None]


def to_command(req: RemotingCommand, result: ControllerResult[Any]) -> RemotingCommand:
    """The response command of a decided request."""
    ext = to_ext(result.response) if result.response is not None else None
    return req.make_response(result.code, result.remark, ext_fields=ext, body=result.body)


class ControllerRequestProcessor:
    """Handlers of one controller node.

    Args:
        pipeline: the leader pipeline (state requests).
        manager: the replicated tables.
        heartbeats: this node's broker heartbeat table.
        metadata: builds the CONTROLLER_GET_METADATA_INFO response header.
        config: the current configuration.
        update_config: applies and persists UPDATE_CONTROLLER_CONFIG values.
        on_elected: called after every SUCCESS election.
        metrics: counts requests per code and elections per result.
        wall_ms: wall-clock time of election events.
    """

    def __init__(
        self,
        *,
        pipeline: ControllerPipeline,
        manager: ReplicasInfoManager,
        heartbeats: BrokerHeartbeatManager,
        metadata: Callable[[], h.GetMetaDataResponseHeader],
        config: Callable[[], ControllerConfig],
        update_config: Callable[[dict[str, str]], Awaitable[None]],
        on_elected: OnElected,
        metrics: ControllerMetrics | None = None,
        wall_ms: Callable[[], int] | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._manager = manager
        self._heartbeats = heartbeats
        self._metadata = metadata
        self._config = config
        self._update_config = update_config
        self._on_elected = on_elected
        self.metrics = metrics or ControllerMetrics()
        self._wall_ms = wall_ms or (lambda: 0)

    def register(self, registry: ProcessorRegistry) -> None:
        """Route every controller request code to its handler."""
        table = {
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_controller_config,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_controller_config,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }
        for code, handler in table.items():
            registry.register(code, self._counted(code, handler))

    def _counted(self, code: int, handler: Processor) -> Processor:
        metrics = self.metrics

        async def counted(ctx: RequestContext, req: RemotingCommand) -> Response:
            metrics.record_request(code)
            return await handler(ctx, req)

        return counted

    # -- every node -----------------------------------------------------------------------------

    async def broker_heartbeat(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """BROKER_HEARTBEAT (904), usually oneway: refresh the live table."""
        hdr = from_ext(h.BrokerHeartbeatRequestHeader, req.ext_fields)
        if hdr.broker_id is None:
            return req.make_response(
                ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId"
            )
        # Channels are hashable connection objects; the table keys rows by them.
        self._heartbeats.on_broker_heartbeat(hdr, cast(Hashable, ctx.channel))
        return req.make_response(ResponseCode.SUCCESS, "Heart beat success")

    async def get_metadata_info(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_GET_METADATA_INFO (1005): group, leader, peers."""
        return req.make_response(ext_fields=to_ext(self._metadata()))

    async def update_controller_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """UPDATE_CONTROLLER_CONFIG (1009): .properties body; black-listed keys refused."""
        return await update_config(
            ctx, req, black_list=self._config().black_list(), apply=self._update_config
        )

    async def get_controller_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_CONTROLLER_CONFIG (1010): the effective configuration as .properties text."""
        return config_response(req, self._config().to_properties())

    # -- leader only (through the pipeline) -----------------------------------------------------

    async def alter_sync_state_set(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001)."""
        hdr = from_ext(h.AlterSyncStateSetRequestHeader, req.ext_fields)
        if not req.body:
            raise CodecError("missing SyncStateSet body", field="body")
        body = decode_sync_state_set(req.body)
        result = await self._pipeline.write(
            lambda: self._manager.alter_sync_state_set(hdr, body, self._heartbeats)
        )
        return to_command(req, result)

    async def elect_master(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_ELECT_MASTER (1002); a SUCCESS notifies the broker-set."""
        hdr = from_ext(h.ElectMasterRequestHeader, req.ext_fields)
        result = await self.elect(hdr)
        return to_command(req, result)

    async def elect(
        self, hdr: h.ElectMasterRequestHeader
    ) -> ControllerResult[h.ElectMasterResponseHeader]:
        """Run one election through the pipeline (any trigger) and notify after SUCCESS."""
        before = self._manager.sync_state_set_info_table.get(hdr.broker_name)
        in_sync = sorted(before.sync_state_set) if before is not None else []
        result = await self._pipeline.write(
            lambda: self._manager.elect_master(hdr, self._heartbeats)
        )
        info = self._manager.sync_state_set_info_table.get(hdr.broker_name)
        self.metrics.record_election(
            self._wall_ms(),
            cluster=info.cluster_name if info is not None else None,
            broker_name=hdr.broker_name,
            trigger_broker_id=hdr.broker_id,
            code=int(result.code),
            master_broker_id=result.response.master_broker_id if result.response else None,
            master_epoch=result.response.master_epoch if result.response else None,
        )
        if result.code == ResponseCode.SUCCESS and result.response is not None:
            log.info(
                "elect master success",
                broker=hdr.broker_name,
                trigger_broker_id=hdr.broker_id,
                designate=hdr.designate_elect,
                new_master=result.response.master_broker_id,
                master_epoch=result.response.master_epoch,
            )
            if in_sync and result.response.master_broker_id not in in_sync:
                # C-08: only enableElectUncleanMaster elects outside the SyncStateSet; whatever
                # the old set acknowledged beyond the new master's log is gone.
                log.warning(
                    "unclean election: new master was not in the SyncStateSet, "
                    "data may have been lost",
                    broker=hdr.broker_name,
                    new_master=result.response.master_broker_id,
                    sync_state_set=in_sync,
                    master_epoch=result.response.master_epoch,
                )
            self._on_elected(result.response, result.body)
        return result

    async def register_broker(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_REGISTER_BROKER (1003)."""
        hdr = from_ext(h.RegisterBrokerToControllerRequestHeader, req.ext_fields)
        result = await self._pipeline.write(
            lambda: self._manager.register_broker(hdr, self._heartbeats)
        )
        return to_command(req, result)

    async def get_replica_info(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_GET_REPLICA_INFO (1004)."""
        hdr = from_ext(h.GetReplicaInfoRequestHeader, req.ext_fields)
        return to_command(
            req, await self._pipeline.read(lambda: self._manager.get_replica_info(hdr))
        )

    async def get_sync_state_data(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006): body = JSON array of broker names."""
        if not req.body:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "not set any response code")
        names = decode_broker_names(req.body)
        result = await self._pipeline.read(
            lambda: self._manager.get_sync_state_data(names, self._heartbeats)
        )
        return to_command(req, result)

    async def clean_broker_data(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CLEAN_BROKER_DATA (1011)."""
        hdr = from_ext(h.CleanControllerBrokerDataRequestHeader, req.ext_fields)
        result = await self._pipeline.write(
            lambda: self._manager.clean_broker_data(hdr, self._heartbeats)
        )
        return to_command(req, result)

    async def get_next_broker_id(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""
        hdr = from_ext(h.GetNextBrokerIdRequestHeader, req.ext_fields)
        result = await self._pipeline.read(lambda: self._manager.get_next_broker_id(hdr))
        return to_command(req, result)

    async def apply_broker_id(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """CONTROLLER_APPLY_BROKER_ID (1013)."""
        hdr = from_ext(h.ApplyBrokerIdRequestHeader, req.ext_fields)
        result = await self._pipeline.write(lambda: self._manager.apply_broker_id(hdr))
        return to_command(req, result)
