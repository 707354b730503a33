"""Processor registry by request code, and the one boundary where errors become response codes.

Owns: :class:`RequestContext` (what a processor knows of the request's connection), the
:data:`Processor` signature, :class:`ProcessorRegistry`, and :func:`dispatch`, which turns a
processor's result or exception into the response upstream's
``NettyRemotingAbstract.processRequestCommand`` would send (remoting.md section 5.1). Must not:
touch sockets directly (the connection object does).

A processor returns the response command, or ``None`` when it answers later itself through
``ctx.send_response`` (long polling) or when the request is oneway.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from rocketpy.common.codes import ResponseCode, request_code_name
from rocketpy.common.errors import CodecError, ControllerError, RemoteError, RocketPyError
from rocketpy.remoting.protocol.command import RemotingCommand

log = structlog.get_logger(__name__)


class Channel(Protocol):
    """The connection a request arrived on, as processors see it."""

    @property
    def peer(self) -> str:
        """``host:port`` of the remote end."""
        ...

    @property
    def is_closed(self) -> bool:
        """True once the connection is closed."""
        ...

    def send_response(self, response: RemotingCommand) -> None:
        """Queue a response (or any command) for writing; dropped if the connection is closed."""
        ...

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to the peer on this connection and await its response."""
        ...

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a oneway request to the peer on this connection."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...


@dataclass(slots=True, frozen=True)
class RequestContext:
    """Per-request context handed to processors."""

    channel: Channel


Processor = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand | None]]


class ProcessorRegistry:
    """Request code -> processor; an optional default processor handles the rest."""

    def __init__(self) -> None:
        self._table: dict[int, Processor] = {}
        self._default: Processor | None = None

    def register(self, code: int, processor: Processor) -> None:
        """Route ``code`` to ``processor`` (later registrations replace earlier ones)."""
        self._table[int(code)] = processor

    def register_default(self, processor: Processor) -> None:
        """Processor for codes without their own entry."""
        self._default = processor

    def lookup(self, code: int) -> Processor | None:
        """The processor for ``code``, else the default, else None."""
        return self._table.get(code, self._default)

    def codes(self) -> frozenset[int]:
        """Codes with their own processor."""
        return frozenset(self._table)


async def dispatch(
    registry: ProcessorRegistry, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand | None:
    """Run the processor for ``request`` and return the response to write (None: nothing to write).

    Unknown code -> REQUEST_CODE_NOT_SUPPORTED with upstream's remark; a domain error -> its code
    and remark; any other exception -> SYSTEM_ERROR with a short description (no traceback on the
    wire). Oneway requests never get a response.
    """
    processor = registry.lookup(request.code)
    response: RemotingCommand | None
    if processor is None:
        log.warning(
            "request type not supported",
            code=request.code,
            name=request_code_name(request.code),
            peer=ctx.channel.peer,
        )
        response = request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
    else:
        try:
            response = await processor(ctx, request)
        except RemoteError as e:
            response = request.make_response(e.code, e.remark)
        except ControllerError as e:
            response = request.make_response(e.code, e.remark)
        except (CodecError, RocketPyError) as e:
            # Bad input or a refused domain operation: a clear remark, no traceback in the log.
            log.warning("request refused", code=request.code, peer=ctx.channel.peer, error=str(e))
            response = request.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        except Exception as e:
            log.exception("process request exception", code=request.code, peer=ctx.channel.peer)
            response = request.make_response(ResponseCode.SYSTEM_ERROR, _simple_desc(e))
    if request.is_oneway or response is None:
        return None
    response.opaque = request.opaque
    return response


def _simple_desc(e: BaseException) -> str:
    """Mirrors ``UtilAll.exceptionSimpleDesc``: type and message, no stack."""
    return f"{type(e).__name__}: {e}"
