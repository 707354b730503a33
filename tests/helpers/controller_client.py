"""A scripted fake broker (and admin) talking to a controller over a real RemotingClient.

Each method sends one controller request exactly as a 5.1.1+ broker does (codes.md section 3)
and returns the raw response, so tests assert on codes, remarks and header fields.
"""

from __future__ import annotations

from rocketpy.common.codes import RequestCode
from rocketpy.remoting.protocol.bodies.controller import (
    SyncStateSet,
    encode_body,
    encode_broker_names,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rocketpy.remoting.transport.client import RemotingClient

CLUSTER = "DefaultCluster"
BROKER = "broker-a"


class FakeBroker:
    """Replica ``broker_id`` of ``broker-a`` at ``address`` (its own remoting address)."""

    def __init__(self, client: RemotingClient, broker_id: int, address: str) -> None:
        self.client = client
        self.broker_id = broker_id
        self.address = address
        self.check_code = f"{address};1700000000000"

    async def call(
        self,
        controller: str,
        code: int,
        header: object | None = None,
        body: bytes | None = None,
        *,
        ext: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """One request with a 5 s deadline."""
        fields = ext if ext is not None else (to_ext(header) if header is not None else None)
        return await self.client.invoke(controller, RemotingCommand.request(code, fields, body), 5)

    async def next_id(self, controller: str) -> RemotingCommand:
        """CONTROLLER_GET_NEXT_BROKER_ID."""
        hdr = GetNextBrokerIdRequestHeader(cluster_name=CLUSTER, broker_name=BROKER)
        return await self.call(controller, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, hdr)

    async def apply_id(self, controller: str, broker_id: int | None = None) -> RemotingCommand:
        """CONTROLLER_APPLY_BROKER_ID with this broker's check code."""
        hdr = ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER,
            broker_name=BROKER,
            applied_broker_id=self.broker_id if broker_id is None else broker_id,
            register_check_code=self.check_code,
        )
        return await self.call(controller, RequestCode.CONTROLLER_APPLY_BROKER_ID, hdr)

    async def register(self, controller: str) -> RemotingCommand:
        """CONTROLLER_REGISTER_BROKER."""
        hdr = RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER,
            broker_name=BROKER,
            broker_id=self.broker_id,
            broker_address=self.address,
        )
        return await self.call(controller, RequestCode.CONTROLLER_REGISTER_BROKER, hdr)

    async def heartbeat(self, controller: str, timeout_ms: int = 1000, epoch: int = 0) -> None:
        """BROKER_HEARTBEAT, oneway as brokers send it."""
        hdr = BrokerHeartbeatRequestHeader(
            cluster_name=CLUSTER,
            broker_addr=self.address,
            broker_name=BROKER,
            broker_id=self.broker_id,
            epoch=epoch,
            max_offset=0,
            confirm_offset=0,
            heartbeat_timeout_mills=timeout_ms,
        )
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, to_ext(hdr), oneway=True)
        await self.client.invoke_oneway(controller, request)

    async def elect_me(self, controller: str) -> RemotingCommand:
        """CONTROLLER_ELECT_MASTER, broker trigger."""
        hdr = ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, self.broker_id)
        return await self.call(controller, RequestCode.CONTROLLER_ELECT_MASTER, hdr)

    async def alter(
        self, controller: str, new_set: set[int], master_epoch: int, set_epoch: int
    ) -> RemotingCommand:
        """CONTROLLER_ALTER_SYNC_STATE_SET as the master."""
        hdr = AlterSyncStateSetRequestHeader(
            broker_name=BROKER, master_broker_id=self.broker_id, master_epoch=master_epoch
        )
        body = encode_body(
            SyncStateSet(sync_state_set=frozenset(new_set), sync_state_set_epoch=set_epoch)
        )
        return await self.call(controller, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, hdr, body)

    async def replica_info(self, controller: str) -> RemotingCommand:
        """CONTROLLER_GET_REPLICA_INFO."""
        hdr = GetReplicaInfoRequestHeader(broker_name=BROKER)
        return await self.call(controller, RequestCode.CONTROLLER_GET_REPLICA_INFO, hdr)

    async def sync_state_data(self, controller: str) -> RemotingCommand:
        """CONTROLLER_GET_SYNC_STATE_DATA for broker-a."""
        body = encode_broker_names([BROKER])
        return await self.call(controller, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, body)

    async def join(self, controller: str) -> None:
        """Next id -> apply -> register -> heartbeat (the persistent-id flow of spec section 9)."""
        got = await self.next_id(controller)
        assert got.ext("nextBrokerId") == str(self.broker_id), got
        applied = await self.apply_id(controller)
        assert applied.code == 0, applied
        registered = await self.register(controller)
        assert registered.code == 0, registered
        await self.heartbeat(controller)
