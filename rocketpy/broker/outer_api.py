"""BrokerOuterAPI: the broker's requests to its NameServers.

Owns: REGISTER_BROKER (103) to every NameServer in parallel with the topic table and its
DataVersion, QUERY_DATA_VERSION (322) for the light "does anyone need a full registration?" path
(``forceRegister=false``), and UNREGISTER_BROKER (104) on a clean stop. Each NameServer is asked
with its own deadline; one slow or dead NameServer never blocks the others, and failures are
logged and left to the next period. Mirrors ``broker/out/BrokerOuterAPI`` (registerBrokerAll,
needRegister, unregisterBrokerAll; codes.md section 1). Must not: import the NameServer package
(the body codec here is the broker's side of the same JSON).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import structlog

from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError, RemotingError
from rocketpy.common.fastjson import Bean
from rocketpy.remoting.protocol.body.config_shapes import (
    TopicConfigSerializeWrapper,
    encode_data_version,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.namesrv import (
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rocketpy.remoting.transport.client import RemotingClient

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerIdentity:
    """Who this broker is, as the registration headers carry it."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int
    ha_server_addr: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterResult:
    """``RegisterBrokerResult`` from one NameServer."""

    namesrv: str
    ha_server_addr: str | None
    master_addr: str | None
    order_topics: Mapping[str, str]


def encode_register_body(wrapper: TopicConfigSerializeWrapper) -> bytes:
    """The JSON ``RegisterBrokerBody`` (``compressed=false``)."""
    return fastjson.dumps(
        Bean(filterServerList=[], topicConfigSerializeWrapper=wrapper.to_json_value())
    ).encode("utf-8")


def _kv_table(body: bytes | None) -> dict[str, str]:
    if not body:
        return {}
    try:
        obj = fastjson.loads(body)
    except CodecError:
        return {}
    table = obj.get("table") if isinstance(obj, dict) else None
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}


class BrokerOuterAPI:
    """Requests from this broker to the NameServers."""

    def __init__(self, client: RemotingClient, *, timeout_ms: int) -> None:
        """Args: ``client`` the broker's outbound remoting client; ``timeout_ms`` the deadline of
        each request (``registerBrokerTimeoutMills``)."""
        self._client = client
        self._timeout_s = timeout_ms / 1000

    async def register_broker_all(
        self,
        namesrvs: Sequence[str],
        who: BrokerIdentity,
        wrapper: TopicConfigSerializeWrapper,
        *,
        heartbeat_timeout_ms: int,
        enable_acting_master: bool = False,
    ) -> list[RegisterResult]:
        """``registerBrokerAll``: REGISTER_BROKER to every NameServer in parallel.

        Returns:
            The results of the NameServers that answered SUCCESS (failures are logged).
        """
        body = encode_register_body(wrapper)
        header = RegisterBrokerRequestHeader(
            broker_name=who.broker_name,
            broker_addr=who.broker_addr,
            cluster_name=who.cluster_name,
            ha_server_addr=who.ha_server_addr,
            broker_id=who.broker_id,
            # Upstream sends a timeout only with acting master; otherwise the NameServer keeps
            # its 120 s default, which outlives the 30 s registration period.
            heartbeat_timeout_millis=heartbeat_timeout_ms if enable_acting_master else None,
            enable_acting_master=enable_acting_master,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        results = await asyncio.gather(
            *(self._register_one(addr, header, body) for addr in namesrvs)
        )
        return [r for r in results if r is not None]

    async def _register_one(
        self, addr: str, header: RegisterBrokerRequestHeader, body: bytes
    ) -> RegisterResult | None:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, to_ext(header), body)
        try:
            response = await self._client.invoke(addr, request, self._timeout_s)
        except RemotingError as e:
            log.warning("register broker to name server failed", namesrv=addr, error=str(e))
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "register broker to name server refused",
                namesrv=addr,
                code=response.code,
                remark=response.remark,
            )
            return None
        rh = from_ext(RegisterBrokerResponseHeader, response.ext_fields)
        log.info("register broker to name server OK", namesrv=addr, broker=header.broker_name)
        return RegisterResult(
            namesrv=addr,
            ha_server_addr=rh.ha_server_addr,
            master_addr=rh.master_addr,
            order_topics=_kv_table(response.body),
        )

    async def need_register(
        self, namesrvs: Sequence[str], who: BrokerIdentity, wrapper: TopicConfigSerializeWrapper
    ) -> bool:
        """``needRegister``: True when any NameServer has a different DataVersion for us (or
        cannot be asked)."""
        header = QueryDataVersionRequestHeader(
            broker_name=who.broker_name,
            broker_addr=who.broker_addr,
            cluster_name=who.cluster_name,
            broker_id=who.broker_id,
        )
        body = encode_data_version(wrapper.data_version)
        answers = await asyncio.gather(*(self._changed(a, header, body) for a in namesrvs))
        return any(answers)

    async def _changed(self, addr: str, header: QueryDataVersionRequestHeader, body: bytes) -> bool:
        request = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, to_ext(header), body)
        try:
            response = await self._client.invoke(addr, request, self._timeout_s)
            if response.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(response.code, response.remark or "")
            changed = from_ext(QueryDataVersionResponseHeader, response.ext_fields).changed
        except (RemotingError, CodecError) as e:
            log.warning("query data version from name server failed", namesrv=addr, error=str(e))
            return True
        log.debug("query data version from name server", namesrv=addr, changed=changed)
        return changed

    async def unregister_broker_all(self, namesrvs: Sequence[str], who: BrokerIdentity) -> None:
        """``unregisterBrokerAll``: UNREGISTER_BROKER to every NameServer in parallel."""
        header = UnRegisterBrokerRequestHeader(
            broker_name=who.broker_name,
            broker_addr=who.broker_addr,
            cluster_name=who.cluster_name,
            broker_id=who.broker_id,
        )
        await asyncio.gather(*(self._unregister_one(a, header) for a in namesrvs))

    async def _unregister_one(self, addr: str, header: UnRegisterBrokerRequestHeader) -> None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, to_ext(header))
        try:
            response = await self._client.invoke(addr, request, self._timeout_s)
        except RemotingError as e:
            log.warning("unregister broker from name server failed", namesrv=addr, error=str(e))
            return
        log.info("unregister broker from name server", namesrv=addr, code=response.code)
