"""Consumer offset and queue-position requests: GET_CONSUMER_LIST_BY_GROUP (38),
QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32).

Mirrors ``broker/processor/ConsumerManageProcessor`` and the offset queries of
``AdminBrokerProcessor`` (client-flows.md sections 4.1, 4.2, 4.4 and 5).
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.broker import encode_consumer_list
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

log = structlog.get_logger(__name__)


class ConsumerManageProcessor:
    """Consumer list and offset requests."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
        }

    async def get_consumer_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getConsumerListByGroup``."""
        header = from_ext(GroupRequestHeader, request.ext_fields)
        info = self._rt.consumers.group(header.consumer_group)
        ids = info.client_ids() if info is not None else []
        if ids:
            return request.make_response(ResponseCode.SUCCESS, body=encode_consumer_list(ids))
        log.warning(
            "getConsumerGroupInfo failed", group=header.consumer_group, peer=ctx.channel.peer
        )
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
        )

    async def query_consumer_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``queryConsumerOffset`` (client-flows.md section 4.2)."""
        h = from_ext(QueryConsumerOffsetRequestHeader, request.ext_fields)
        rt = self._rt
        offset = rt.offsets.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset >= 0:
            return _offset_response(request, offset)
        if h.set_zero_if_not_found is False:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                "Not found, do not set to zero, maybe this group boot first",
            )
        min_offset = rt.store.min_offset_in_queue(h.topic, h.queue_id)
        if min_offset <= 0 and rt.store.check_in_mem_by_consume_offset(h.topic, h.queue_id, 0):
            return _offset_response(request, 0)
        return request.make_response(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    async def update_consumer_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``updateConsumerOffset`` (Java clients send it oneway every 5 s)."""
        h = from_ext(UpdateConsumerOffsetRequestHeader, request.ext_fields)
        rt = self._rt
        if not rt.groups.contains(h.consumer_group):
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {h.consumer_group} not exist!"
            )
        if rt.topics.select(h.topic) is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"Topic {h.topic} not exist!"
            )
        if rt.config.use_server_side_reset_offset and rt.offsets.has_offset_reset(
            h.topic, h.consumer_group, h.queue_id
        ):
            log.info(
                "Update consumer offset is rejected because of previous offset-reset",
                group=h.consumer_group,
                topic=h.topic,
                queue_id=h.queue_id,
                offset=h.commit_offset,
            )
            return request.make_response(ResponseCode.SUCCESS)
        rt.offsets.commit_offset(
            ctx.channel.peer, h.consumer_group, h.topic, h.queue_id, h.commit_offset
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def get_max_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getMaxOffset``: the next offset to be written (0 for an unknown queue)."""
        h = from_ext(GetMaxOffsetRequestHeader, request.ext_fields)
        return _offset_response(request, self._rt.store.max_offset_in_queue(h.topic, h.queue_id))

    async def get_min_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getMinOffset``."""
        h = from_ext(QueueRequestHeader, request.ext_fields)
        return _offset_response(request, self._rt.store.min_offset_in_queue(h.topic, h.queue_id))

    async def search_offset_by_timestamp(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``searchOffsetByTimestamp``; ``boundaryType`` UPPER (case-insensitive) else LOWER."""
        h = from_ext(SearchOffsetRequestHeader, request.ext_fields)
        upper = (h.boundary_type or "").strip().lower() == "upper"
        offset = self._rt.store.offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp, upper)
        return _offset_response(request, offset)

    async def get_earliest_msg_storetime(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getEarliestMsgStoretime``."""
        h = from_ext(QueueRequestHeader, request.ext_fields)
        ts = self._rt.store.earliest_message_time(h.topic, h.queue_id)
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields=to_ext(GetEarliestMsgStoretimeResponseHeader(timestamp=ts)),
        )


def _offset_response(request: RemotingCommand, offset: int) -> RemotingCommand:
    return request.make_response(
        ResponseCode.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(offset=offset))
    )
