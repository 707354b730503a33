"""The broker's requests to the controller group (controller mode).

Owns: one method per controller request a 5.1.1+ broker sends -- CONTROLLER_GET_METADATA_INFO
(1005), CONTROLLER_GET_NEXT_BROKER_ID (1012), CONTROLLER_APPLY_BROKER_ID (1013),
CONTROLLER_REGISTER_BROKER (1003), CONTROLLER_ELECT_MASTER (1002), CONTROLLER_GET_REPLICA_INFO
(1004), CONTROLLER_ALTER_SYNC_STATE_SET (1001) and the oneway BROKER_HEARTBEAT (904) -- with a
deadline each, turning error responses into :class:`RemoteError`. Must not: decide anything
(``broker/replicas_manager.py`` does) or import the controller package (STYLE.md section 4).
Mirrors the controller half of ``broker/out/BrokerOuterAPI`` (controller.md sections 4, 9, 10).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError
from rocketpy.remoting.protocol.bodies.controller import (
    SyncStateSet,
    decode_elect_master_body,
    decode_sync_state_set,
    encode_body,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from rocketpy.remoting.transport.client import RemotingClient

#: ``BrokerOuterAPI`` uses 3 s for every controller request.
CONTROLLER_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerMetadata:
    """CONTROLLER_GET_METADATA_INFO: who leads the controller group (None while unknown)."""

    leader_id: str | None
    leader_address: str | None
    is_leader: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class MasterInfo:
    """The broker-set's master as register, elect and replica-info answers carry it.

    ``master_broker_id`` is None when the controller names no (alive) master; the epochs are 0
    when absent.
    """

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int]


def _check(response: RemotingCommand, *accepted: int) -> RemotingCommand:
    if response.code not in (ResponseCode.SUCCESS, *accepted):
        raise RemoteError.for_code(response.code, response.remark or "")
    return response


def _sync_state_set(body: bytes | None) -> SyncStateSet:
    if not body:
        return SyncStateSet()
    try:
        return decode_sync_state_set(body)
    except CodecError as e:
        raise RemoteError(ResponseCode.SYSTEM_ERROR, f"bad SyncStateSet body: {e}") from e


class BrokerControllerAPI:
    """Controller requests of one broker (shares the broker's outbound client)."""

    def __init__(self, client: RemotingClient, *, timeout_s: float = CONTROLLER_TIMEOUT_S) -> None:
        """Args: ``client`` the broker's outbound remoting client; ``timeout_s`` per request."""
        self._client = client
        self._timeout_s = timeout_s

    async def _invoke(
        self, addr: str, code: int, header: object | None, body: bytes | None = None
    ) -> RemotingCommand:
        fields = to_ext(header) if header is not None else None
        request = RemotingCommand.request(code, fields, body)
        return await self._client.invoke(addr, request, self._timeout_s)

    async def get_controller_metadata(self, addr: str) -> ControllerMetadata:
        """CONTROLLER_GET_METADATA_INFO on ``addr`` (any controller answers).

        Raises:
            RemotingError: unreachable, timed out, or an error response.
        """
        response = _check(await self._invoke(addr, RequestCode.CONTROLLER_GET_METADATA_INFO, None))
        h = from_ext(GetMetaDataResponseHeader, response.ext_fields)
        return ControllerMetadata(
            leader_id=h.controller_leader_id or None,
            leader_address=h.controller_leader_address or None,
            is_leader=h.is_leader,
        )

    async def get_next_broker_id(self, leader: str, cluster: str, broker: str) -> int:
        """CONTROLLER_GET_NEXT_BROKER_ID: the id the broker-set would assign next.

        Raises:
            RemotingError: unreachable, timed out, or an error response.
        """
        header = GetNextBrokerIdRequestHeader(cluster_name=cluster, broker_name=broker)
        response = _check(
            await self._invoke(leader, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, header)
        )
        got = from_ext(GetNextBrokerIdResponseHeader, response.ext_fields).next_broker_id
        if got is None:
            raise RemoteError(ResponseCode.SYSTEM_ERROR, "GET_NEXT_BROKER_ID without nextBrokerId")
        return got

    async def apply_broker_id(
        self, leader: str, cluster: str, broker: str, *, broker_id: int, check_code: str
    ) -> None:
        """CONTROLLER_APPLY_BROKER_ID: claim ``broker_id`` with ``check_code``.

        Raises:
            RemotingError: unreachable, timed out, or refused (e.g. CONTROLLER_BROKER_ID_INVALID).
        """
        header = ApplyBrokerIdRequestHeader(
            cluster_name=cluster,
            broker_name=broker,
            applied_broker_id=broker_id,
            register_check_code=check_code,
        )
        _check(await self._invoke(leader, RequestCode.CONTROLLER_APPLY_BROKER_ID, header))

    async def register_broker(
        self, leader: str, cluster: str, broker: str, *, broker_id: int, address: str, now_ms: int
    ) -> MasterInfo:
        """CONTROLLER_REGISTER_BROKER ("registerBrokerToController").

        Raises:
            RemotingError: unreachable, timed out, or refused (e.g. 2010 not registered).
        """
        header = RegisterBrokerToControllerRequestHeader(
            cluster_name=cluster,
            broker_name=broker,
            broker_id=broker_id,
            broker_address=address,
            invoke_time=now_ms,
        )
        response = _check(
            await self._invoke(leader, RequestCode.CONTROLLER_REGISTER_BROKER, header)
        )
        h = from_ext(RegisterBrokerToControllerResponseHeader, response.ext_fields)
        sss = _sync_state_set(response.body)
        return MasterInfo(
            master_broker_id=h.master_broker_id,
            master_address=h.master_address,
            master_epoch=h.master_epoch or 0,
            sync_state_set_epoch=h.sync_state_set_epoch or sss.sync_state_set_epoch,
            sync_state_set=sss.sync_state_set,
        )

    async def elect_master(
        self, leader: str, cluster: str, broker: str, broker_id: int
    ) -> MasterInfo:
        """CONTROLLER_ELECT_MASTER, broker trigger (``ofBrokerTrigger``); 2011
        CONTROLLER_MASTER_STILL_EXIST counts as success, as upstream brokers treat it.

        Raises:
            RemotingError: unreachable, timed out, or refused (e.g. 2012 elect failed).
        """
        header = ElectMasterRequestHeader.of_broker_trigger(cluster, broker, broker_id)
        response = _check(
            await self._invoke(leader, RequestCode.CONTROLLER_ELECT_MASTER, header),
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
        )
        h = from_ext(ElectMasterResponseHeader, response.ext_fields)
        members: frozenset[int] = frozenset()
        if response.body:
            try:
                members = decode_elect_master_body(response.body).sync_state_set
            except CodecError as e:
                raise RemoteError(ResponseCode.SYSTEM_ERROR, f"bad ElectMaster body: {e}") from e
        return MasterInfo(
            master_broker_id=h.master_broker_id,
            master_address=h.master_address,
            master_epoch=h.master_epoch or 0,
            sync_state_set_epoch=h.sync_state_set_epoch or 0,
            sync_state_set=members,
        )

    async def get_replica_info(self, leader: str, broker: str) -> MasterInfo:
        """CONTROLLER_GET_REPLICA_INFO.

        Raises:
            RemotingError: unreachable, timed out, or refused (2008 metadata not exist).
        """
        header = GetReplicaInfoRequestHeader(broker_name=broker)
        response = _check(
            await self._invoke(leader, RequestCode.CONTROLLER_GET_REPLICA_INFO, header)
        )
        h = from_ext(GetReplicaInfoResponseHeader, response.ext_fields)
        sss = _sync_state_set(response.body)
        return MasterInfo(
            master_broker_id=h.master_broker_id,
            master_address=h.master_address,
            master_epoch=h.master_epoch or 0,
            sync_state_set_epoch=sss.sync_state_set_epoch,
            sync_state_set=sss.sync_state_set,
        )

    async def alter_sync_state_set(
        self,
        leader: str,
        broker: str,
        *,
        master_broker_id: int,
        master_epoch: int,
        new_set: frozenset[int],
        sync_state_set_epoch: int,
    ) -> SyncStateSet:
        """CONTROLLER_ALTER_SYNC_STATE_SET as the master of ``master_epoch``.

        Returns:
            The set the controller committed, with its new epoch.

        Raises:
            RemotingError: unreachable, timed out, or refused (2000-2013).
        """
        header = AlterSyncStateSetRequestHeader(
            broker_name=broker, master_broker_id=master_broker_id, master_epoch=master_epoch
        )
        body = encode_body(
            SyncStateSet(sync_state_set=new_set, sync_state_set_epoch=sync_state_set_epoch)
        )
        response = _check(
            await self._invoke(leader, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
        )
        committed = _sync_state_set(response.body)
        epoch = from_ext(AlterSyncStateSetResponseHeader, response.ext_fields)
        return SyncStateSet(
            sync_state_set=committed.sync_state_set or new_set,
            sync_state_set_epoch=committed.sync_state_set_epoch or epoch.new_sync_state_set_epoch,
        )

    async def send_heartbeat(self, addr: str, header: BrokerHeartbeatRequestHeader) -> None:
        """BROKER_HEARTBEAT, oneway (``sendHeartbeatToController``).

        Raises:
            RemotingError: the connection could not be made.
        """
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, to_ext(header), oneway=True)
        await self._client.invoke_oneway(addr, request)
