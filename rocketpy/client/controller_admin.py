"""The mqadmin backend for controllers (``getControllerMetaData``, ``electMaster``,
``getSyncStateData``, ``cleanBrokerData``, controller config).

Owns: :class:`ControllerAdminClient`: metadata from the named controller, everything else on its
leader. Must not: print (``cli/admin_controller.py`` formats the output).
"""

from __future__ import annotations

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.common.properties import parse_properties, render_properties
from rocketpy.remoting.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    decode_broker_replicas_info,
    decode_elect_master_body,
    encode_broker_names,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.controller import (
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
)
from rocketpy.remoting.transport.client import RemotingClient


class ControllerAdminClient:
    """Admin requests to controllers: metadata from the named one, the rest via its leader.

    Mirrors ``MQClientAPIImpl.getControllerMetaData`` / ``electMaster`` /
    ``getInSyncStateData`` / ``cleanControllerBrokerData`` / ``get|updateControllerConfig``.
    """

    def __init__(self, *, timeout_s: float = 3.0) -> None:
        self._timeout_s = timeout_s
        self._remoting = RemotingClient(name="mqadmin-controller")

    async def close(self) -> None:
        """Close every connection."""
        await self._remoting.close()

    async def _ok(
        self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        resp = await self._remoting.invoke(
            addr, RemotingCommand.request(code, ext, body), self._timeout_s
        )
        if resp.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(resp.code, resp.remark or "")
        return resp

    async def metadata(self, controller: str) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO (1005) of ``controller``."""
        resp = await self._ok(controller, RequestCode.CONTROLLER_GET_METADATA_INFO)
        return from_ext(GetMetaDataResponseHeader, resp.ext_fields)

    async def _leader(self, controller: str) -> str:
        leader = (await self.metadata(controller)).controller_leader_address
        if not leader:
            raise RemoteError(ResponseCode.CONTROLLER_NOT_LEADER, "no controller leader known")
        return leader

    async def elect_master(
        self, controller: str, cluster: str, broker_name: str, broker_id: int
    ) -> tuple[ElectMasterResponseHeader, BrokerMemberGroup | None]:
        """CONTROLLER_ELECT_MASTER (1002), admin trigger, on the leader."""
        hdr = ElectMasterRequestHeader.of_admin_trigger(cluster, broker_name, broker_id)
        resp = await self._ok(
            await self._leader(controller), RequestCode.CONTROLLER_ELECT_MASTER, to_ext(hdr)
        )
        group = decode_elect_master_body(resp.body).broker_member_group if resp.body else None
        return from_ext(ElectMasterResponseHeader, resp.ext_fields), group

    async def sync_state_data(self, controller: str, broker_names: list[str]) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006) on the leader."""
        resp = await self._ok(
            await self._leader(controller),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            body=encode_broker_names(broker_names),
        )
        return decode_broker_replicas_info(resp.body or b"{}")

    async def clean_broker_data(
        self,
        controller: str,
        *,
        cluster: str | None,
        broker_name: str,
        ids_to_clean: str | None,
        clean_living: bool,
    ) -> None:
        """CLEAN_BROKER_DATA (1011) on the leader."""
        hdr = CleanControllerBrokerDataRequestHeader(
            cluster_name=cluster,
            broker_name=broker_name,
            broker_controller_ids_to_clean=ids_to_clean,
            is_clean_living_broker=clean_living,
        )
        await self._ok(await self._leader(controller), RequestCode.CLEAN_BROKER_DATA, to_ext(hdr))

    async def controller_config(self, controllers: list[str]) -> dict[str, dict[str, str]]:
        """GET_CONTROLLER_CONFIG (1010) of every listed controller."""
        out = {}
        for addr in controllers:
            resp = await self._ok(addr, RequestCode.GET_CONTROLLER_CONFIG)
            out[addr] = parse_properties((resp.body or b"").decode("utf-8"))
        return out

    async def update_controller_config(
        self, controllers: list[str], values: dict[str, str]
    ) -> None:
        """UPDATE_CONTROLLER_CONFIG (1009) on every listed controller."""
        body = render_properties(values).encode("utf-8")
        for addr in controllers:
            await self._ok(addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=body)
