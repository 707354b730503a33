"""The answer to a stored send, encoded once: SendMessageResponseHeader's frame from a template.

Owns: :class:`SendAnswers`, which gives a stored send's response (``handlePutMessageResult``'s
success branch: the response code, ``MSG_REGION``, ``TRACE_ON``, ``msgId``, ``queueId``,
``queueOffset``, ``transactionId``) as a command, or -- on the synchronous send path -- as the
whole frame, written straight from a template with no command, no extFields map and no generic
header encode (those cost more than the rest of the answer). Both forms are the same bytes: the
frame is what :func:`~rocketpy.remoting.protocol.frame.encode_frame` writes for the command
(keys, order, escaping; ``tests/unit/broker/test_send_answer.py`` compares them). Must not:
decide the response code (the caller maps the store's status).
"""

from __future__ import annotations

from typing import Final

import orjson

from rocketpy.broker.config import BrokerConfig
from rocketpy.common.codes import LanguageCode
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol.command import CURRENT_VERSION, RPC_TYPE_RESPONSE, RemotingCommand
from rocketpy.remoting.protocol.frame import JSON_PREFIX

_PREFIX: Final = JSON_PREFIX.pack
#: The JSON header of a stored send's response as header_json.encode_header writes it, cut
#: where a response's own values go; the region and trace values (JSON text) are filled in once
#: per config. Joined by an f-string per send (a %-template cost ~150 ns more).
_HEAD: Final = '{"code":'
_IDS: Final = ',"extFields":{"MSG_REGION":%s,"TRACE_ON":"%s","msgId":"'
_QUEUE: Final = '","queueId":"'
_OFFSET: Final = '","queueOffset":"'
_TXN: Final = '","transactionId":'
_OPAQUE: Final = f'}},"flag":{RPC_TYPE_RESPONSE},"language":"{LanguageCode.JAVA.name}","opaque":'
_TAIL: Final = f',"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION}}}'


class SendAnswers:
    """Stored sends' responses for one broker config (``regionId``, ``traceOn``)."""

    def __init__(self) -> None:
        self._built_for: object = None
        self._ids = ""  # _IDS for the config
        self._ext: dict[str, str] = {}

    def _refresh(self, config: BrokerConfig) -> None:
        """Rebuild for ``config`` (UPDATE_BROKER_CONFIG swaps the config object)."""
        trace = "true" if config.trace_on else "false"
        self._ext = {MessageConst.MSG_REGION: config.region_id, MessageConst.TRACE_ON: trace}
        self._ids = _IDS % (orjson.dumps(config.region_id).decode(), trace)
        self._built_for = config

    def ext(self, config: BrokerConfig) -> dict[str, str]:
        """A fresh copy of the extFields every send response carries (refusals too)."""
        if self._built_for is not config:
            self._refresh(config)
        return dict(self._ext)

    def command(  # noqa: PLR0917 -- the response's fields, positional per send
        self,
        config: BrokerConfig,
        request: RemotingCommand,
        code: int,
        msg_id: str,
        queue_id: int,
        queue_offset: int,
        uniq: str,
    ) -> RemotingCommand:
        """The response as a command (a send answered after a wait)."""
        ext = self.ext(config)
        ext["msgId"] = msg_id
        ext["queueId"] = str(queue_id)
        ext["queueOffset"] = str(queue_offset)
        ext["transactionId"] = uniq
        return request.make_response(code, ext_fields=ext)

    def frame(  # noqa: PLR0917 -- as command()
        self,
        config: BrokerConfig,
        opaque: int,
        code: int,
        msg_id: str,
        queue_id: int,
        queue_offset: int,
        uniq: str,
    ) -> bytes:
        """The same response as :meth:`command`, encoded as its whole frame."""
        if self._built_for is not config:
            self._refresh(config)
        # msgId is hex and the numbers digits; the UNIQ_KEY is the sender's text: escaped as
        # orjson escapes it unless it is only letters and digits (then it is its own JSON).
        quoted = f'"{uniq}"' if uniq.isalnum() else orjson.dumps(uniq).decode()
        header = (
            f"{_HEAD}{int(code)}{self._ids}{msg_id}{_QUEUE}{queue_id}{_OFFSET}{queue_offset}"
            f"{_TXN}{quoted}{_OPAQUE}{opaque}{_TAIL}"
        ).encode()
        # A few hundred bytes: far below the 24-bit header limit encode_frame checks.
        return _PREFIX(4 + len(header), len(header)) + header
