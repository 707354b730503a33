"""NOTIFY_MIN_BROKER_ID_CHANGE (905) and EXCHANGE_BROKER_HA_INFO (906).

Owns: decoding both headers and handing them to the
:class:`~rocketpy.broker.acting_master.ActingMasterService` / the classic HA client. 905 arrives
oneway from a NameServer on the broker's own registration connection; 906 comes from a peer
broker of the set during pre-online. Mirrors ``AdminBrokerProcessor.notifyMinBrokerIdChange`` and
``updateBrokerHaInfo`` of apache/rocketmq 5.x.

Decided: rocketpy's store has no ``masterFlushedOffset`` (``syncMasterFlushOffsetWhenStartup``),
so a slave ignores the ``masterFlushOffset`` it is sent; a master answers it with the commit-log
max offset it started with, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from rocketpy.broker.acting_master import MASTER_ID, ActingMasterService, HAAddressSink
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import ExchangeHAInfoHeader
from rocketpy.remoting.protocol.headers.namesrv import NotifyMinBrokerIdChangeRequestHeader
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

log = structlog.get_logger(__name__)


class ActingMasterProcessor:
    """The two requests of slave-acting-master mode."""

    def __init__(
        self,
        acting: ActingMasterService,
        *,
        broker_id: Callable[[], int],
        ha: Callable[[], HAAddressSink | None],
        ha_server_addr: Callable[[], str],
        address: Callable[[], str],
        init_max_offset: Callable[[], int],
    ) -> None:
        """Args: ``acting`` the service; ``broker_id`` this broker's id; ``ha`` the classic HA
        service; ``ha_server_addr``/``address`` this broker's HA and remoting addresses;
        ``init_max_offset`` the commit-log max offset at start."""
        self._acting = acting
        self._broker_id = broker_id
        self._ha = ha
        self._ha_server_addr = ha_server_addr
        self._address = address
        self._init_max_offset = init_max_offset

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE: self.notify_min_broker_id_change,
            RequestCode.EXCHANGE_BROKER_HA_INFO: self.exchange_broker_ha_info,
        }

    async def notify_min_broker_id_change(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``notifyMinBrokerIdChange``."""
        h = from_ext(NotifyMinBrokerIdChangeRequestHeader, request.ext_fields)
        log.warning(
            "min broker id changed",
            prev=self._acting.min_broker_id,
            new=h.min_broker_id,
            offline=h.offline_broker_addr,
        )
        if h.min_broker_id is not None:
            await self._acting.update_min_broker(
                h.min_broker_id, h.min_broker_addr, h.offline_broker_addr, h.ha_broker_addr
            )
        return request.make_response(ResponseCode.SUCCESS)

    async def exchange_broker_ha_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``updateBrokerHaInfo``: a master's HA address to follow, or (asked with nothing) this
        master's own."""
        h = from_ext(ExchangeHAInfoHeader, request.ext_fields)
        if h.master_ha_address is not None:
            log.info("master ha info received", master=h.master_address, ha=h.master_ha_address)
            self._acting.master_addr = h.master_address
            ha = self._ha()
            if ha is not None:
                ha.update_ha_master_address(h.master_ha_address)
            return request.make_response(ResponseCode.SUCCESS)
        if self._broker_id() == MASTER_ID:
            mine = ExchangeHAInfoHeader(
                master_ha_address=self._ha_server_addr(),
                master_flush_offset=self._init_max_offset(),
                master_address=self._address(),
            )
            return request.make_response(ResponseCode.SUCCESS, ext_fields=to_ext(mine))
        return request.make_response(ResponseCode.SUCCESS)
