"""RemotingCommand: the one message type of RocketMQ remoting (requests and responses).

Owns: the in-memory model of a frame's header and body, flag bits, and building responses. Mirrors
``org.apache.rocketmq.remoting.protocol.RemotingCommand``. Must not: do I/O or encode bytes
(``frame.py`` and the header codecs do).

Header model (spec remoting.md section 2):

| field       | type              | notes                                                  |
| ----------- | ----------------- | ------------------------------------------------------ |
| code        | int               | request code or response code; unknown codes stay int  |
| language    | int               | ``LanguageCode`` value; JSON carries the enum name      |
| version     | int               | sender's MQVersion ordinal                             |
| opaque      | int (int32)       | request id, echoed by the response                     |
| flag        | int (int32)       | bit 0 response, bit 1 oneway                           |
| remark      | str or None       | error text                                             |
| ext_fields  | dict[str,str]     | custom header fields, ``extFields`` on the wire        |
| body        | bytes or None     | opaque payload; empty body is ``None``                 |
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Final

from rocketpy.common.codes import LanguageCode, ResponseCode

RPC_TYPE_RESPONSE: Final = 0b01
RPC_ONEWAY: Final = 0b10

#: MQVersion ordinal our daemons and clients send: V5_3_3 (remoting.md section 6).
CURRENT_VERSION: Final = 479

_opaque_counter = itertools.count(1)
_new: Final = object.__new__


def next_opaque() -> int:
    """A process-wide request id, wrapping within int32 like Java's AtomicInteger."""
    value = next(_opaque_counter) & 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


@dataclass(slots=True, kw_only=True)
class RemotingCommand:
    """One request or response.

    Mutable on purpose: processors fill ``ext_fields``/``body`` of the response they build.
    """

    code: int
    language: int = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    #: serialize type the frame arrived in (0 JSON, 1 ROCKETMQ); informational only.
    serialize_type: int = 0

    @property
    def is_response(self) -> bool:
        """True when flag bit 0 is set."""
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when flag bit 1 is set (no response will be written)."""
        return bool(self.flag & RPC_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        oneway: bool = False,
        language: int = LanguageCode.JAVA,
        version: int = CURRENT_VERSION,
    ) -> RemotingCommand:
        """A new request with a fresh opaque."""
        return cls(
            code=code,
            language=language,
            version=version,
            opaque=next_opaque(),
            flag=RPC_ONEWAY if oneway else 0,
            ext_fields=ext_fields,
            body=body,
        )

    def make_response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        *,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque, flag = response only (remoting.md section
        5)."""
        return RemotingCommand(
            code=code,
            language=LanguageCode.JAVA,
            version=CURRENT_VERSION,
            opaque=self.opaque,
            flag=RPC_TYPE_RESPONSE,
            remark=remark,
            ext_fields=ext_fields,
            body=body,
        )

    @classmethod
    def decoded(  # noqa: PLR0917 -- a decoded header's fields, positional per frame
        cls,
        code: int,
        language: int,
        version: int,
        opaque: int,
        flag: int,
        remark: str | None,
        ext_fields: dict[str, str] | None,
    ) -> RemotingCommand:
        """A command as a header decoder makes it (no body yet, serialize type 0): its fields
        stored into a new instance, without the keyword call of ``__init__`` (one per frame;
        ``tests/unit/remoting`` checks it sets every field)."""
        cmd = _new(cls)
        cmd.code = code
        cmd.language = language
        cmd.version = version
        cmd.opaque = opaque
        cmd.flag = flag
        cmd.remark = remark
        cmd.ext_fields = ext_fields
        cmd.body = None
        cmd.serialize_type = 0
        return cmd

    def ext(self, key: str) -> str | None:
        """One ``extFields`` value, or None."""
        return None if self.ext_fields is None else self.ext_fields.get(key)
