"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25).

Owns: the ``.properties`` bodies and the black list (acceptance C-19/P-10: path settings and the
black list itself can never be changed remotely). Mirrors ``AdminBrokerProcessor.getBrokerConfig``
/ ``updateBrokerConfig`` (5.3.x, after the CVE-2023-33246/37582 fixes). The live update itself is
the service's (:class:`BrokerConfigAccess`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

import structlog

from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConfigError
from rocketpy.common.properties import parse_properties, render_properties
from rocketpy.remoting.protocol.body.config_shapes import DataVersion
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.broker import GetBrokerConfigResponseHeader
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

log = structlog.get_logger(__name__)

#: Keys no remote update may touch, besides those listed in ``configBlackList``.
ALWAYS_BLACK_LISTED: Final = frozenset(
    {
        "configBlackList",
        "brokerConfigPath",
        "rocketmqHome",
        "storePathRootDir",
        "storePathCommitLog",
        "storePathConsumeQueue",
        "storePathIndex",
        "storePathEpochFile",
        "storePathBrokerIdentity",
        "kvConfigPath",
        "configStorePath",
    }
)
BLACK_LIST_REMARK: Final = "Can not update config in black list."

#: Keys read once at start-up (identity, listeners, pools and index sizes built from them):
#: a live update would be shown by GET_BROKER_CONFIG without taking effect, or would re-register
#: the broker under another name, so it is refused. Our decision; upstream accepts them and
#: applies them at the next restart.
START_UP_ONLY: Final = frozenset(
    {
        "brokerName",
        "brokerClusterName",
        "brokerId",
        "brokerIP1",
        "brokerIP2",
        "listenPort",
        "bindAddress",
        "brokerRole",
        "messageDelayLevel",
        "maxHashSlotNum",
        "maxIndexNum",
        "sendMessageThreadPoolNums",
        "pullMessageThreadPoolNums",
        "queryMessageThreadPoolNums",
        "adminBrokerThreadPoolNums",
        "clientManageThreadPoolNums",
        "consumerManageThreadPoolNums",
        "sendThreadPoolQueueCapacity",
        "pullThreadPoolQueueCapacity",
        "queryThreadPoolQueueCapacity",
        "adminBrokerThreadPoolQueueCapacity",
        "clientManagerThreadPoolQueueCapacity",
        "consumerManagerThreadPoolQueueCapacity",
    }
)


class BrokerConfigAccess(Protocol):
    """The broker's live configuration as admin requests see it."""

    def render(self) -> dict[str, str]:
        """Every key (broker, remoting and store) with its current value."""
        ...

    @property
    def data_version(self) -> DataVersion:
        """Bumped on every successful update."""
        ...

    @property
    def black_list(self) -> frozenset[str]:
        """The configured ``configBlackList`` keys."""
        ...

    def update(self, values: Mapping[str, str]) -> None:
        """Apply ``values`` (validated) to the running broker.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        ...


class BrokerConfigProcessor:
    """Config get/update."""

    def __init__(self, access: BrokerConfigAccess) -> None:
        """Args: ``access`` the service's live configuration."""
        self._access = access

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
        }

    async def get_broker_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getBrokerConfig``: ``.properties`` body, DataVersion JSON in header ``version``."""
        version = fastjson.dumps(self._access.data_version.to_json_value())
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields=to_ext(GetBrokerConfigResponseHeader(version=version)),
            body=render_properties(self._access.render()).encode("utf-8"),
        )

    async def update_broker_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``updateBrokerConfig``: black-listed keys -> NO_PERMISSION, start-up-only keys ->
        INVALID_PARAMETER, unknown keys or bad values -> SYSTEM_ERROR; nothing applied."""
        if not request.body:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "the request body is empty")
        try:
            values = parse_properties(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        forbidden = sorted(k for k in values if k in ALWAYS_BLACK_LISTED | self._access.black_list)
        if forbidden:
            log.warning(
                "refuse to update black-listed config", keys=forbidden, peer=ctx.channel.peer
            )
            return request.make_response(ResponseCode.NO_PERMISSION, BLACK_LIST_REMARK)
        start_up_only = sorted(k for k in values if k in START_UP_ONLY)
        if start_up_only:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"Config {start_up_only} is read only at broker start-up: change it in the "
                "broker config file and restart the broker.",
            )
        try:
            self._access.update(values)
        except ConfigError as e:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        log.info("update broker config", keys=sorted(values), peer=ctx.channel.peer)
        return request.make_response(ResponseCode.SUCCESS)
