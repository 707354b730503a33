"""The UPDATE/GET config requests every daemon serves the same way (NameServer 318/319,
controller 1009/1010): a ``.properties`` body, black-listed keys refused.

Owns: :func:`update_config` and :func:`config_response`. Mirrors the identical handlers of
``ClusterTestRequestProcessor``/``DefaultRequestProcessor`` and ``ControllerRequestProcessor``.
Must not: know which daemon's config it is (the caller passes the black list and the updater).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Set

import structlog

from rocketpy.common.codes import ResponseCode
from rocketpy.common.properties import parse_properties, render_properties
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import RequestContext

log = structlog.get_logger(__name__)


async def update_config(
    ctx: RequestContext,
    req: RemotingCommand,
    *,
    black_list: Set[str],
    apply: Callable[[dict[str, str]], Awaitable[None]],
) -> RemotingCommand:
    """Parse the ``.properties`` body, refuse black-listed keys (NO_PERMISSION), else apply."""
    try:
        values = parse_properties((req.body or b"").decode("utf-8"))
    except UnicodeDecodeError:
        return req.make_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
    if set(values) & black_list:
        return req.make_response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    await apply(values)
    log.info("updateConfig called", keys=sorted(values), peer=ctx.channel.peer)
    return req.make_response()


def config_response(req: RemotingCommand, properties: dict[str, str]) -> RemotingCommand:
    """The effective configuration as ``.properties`` text."""
    return req.make_response(body=render_properties(properties).encode("utf-8"))
