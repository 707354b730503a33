"""QUERY_MESSAGE (12) by key through the index, VIEW_MESSAGE_BY_ID (33) by commit-log offset.

Mirrors ``broker/processor/QueryMessageProcessor`` (client-flows.md section 5): bodies are the
stored records back to back (message-format.md section 1); a query flagged
``_UNIQUE_KEY_QUERY=true`` is capped at ``defaultQueryMaxNum``.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


class QueryMessageProcessor:
    """Message lookups."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
        }

    async def query_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``queryMessage``."""
        h = from_ext(QueryMessageRequestHeader, request.ext_fields)
        max_num = h.max_num
        if request.ext(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self._rt.default_query_max_num
        result = await self._rt.store.query_message(
            h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp
        )
        header = to_ext(
            QueryMessageResponseHeader(
                index_last_update_timestamp=result.index_last_update_timestamp,
                index_last_update_phyoffset=result.index_last_update_phyoffset,
            )
        )
        if not result.records:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext_fields=header,
            )
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=header, body=b"".join(result.records)
        )

    async def view_message_by_id(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``viewMessageById``: the raw record at a commit-log offset."""
        h = from_ext(ViewMessageRequestHeader, request.ext_fields)
        record = self._rt.store.select_one_message_by_offset(h.offset)
        if record is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}"
            )
        return request.make_response(ResponseCode.SUCCESS, body=record)
