"""``python -m rocketpy.tools.grpc_floor``: grpc.aio's own per-call cost, for ``make bench-proxy``.

Owns: a ``grpc.aio`` server of ``MessagingService`` whose ``SendMessage`` handler does nothing but
return a prepared OK response (the request is still decoded and the response encoded by grpcio,
as the proxy's are). Under the bench's send load it gives the ceiling any proxy written on
``grpc.aio`` in this interpreter can reach, so the proxy's own send cost is the difference. Prints
``grpc floor listening on 127.0.0.1:<port>`` once bound. Must not: import ``rocketpy.proxy``
beyond its generated stubs (the figure is grpcio's, not the proxy's). Has no upstream
counterpart.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

import grpc

from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.tools.benchmark import run_loop

BOOT_LINE = "grpc floor listening on {host}:{port}"
_METHOD = "SendMessage"


async def _serve(host: str) -> None:
    response = spb.SendMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"))

    async def send(request: Any, context: Any) -> spb.SendMessageResponse:
        return response

    handler = grpc.method_handlers_generic_handler(
        "apache.rocketmq.v2.MessagingService",
        {
            _METHOD: grpc.unary_unary_rpc_method_handler(
                send, spb.SendMessageRequest.FromString,
                spb.SendMessageResponse.SerializeToString,
            )
        },
    )  # fmt: skip
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    port = server.add_insecure_port(f"{host}:0")
    server.add_generic_rpc_handlers((handler,))
    await server.start()
    print(BOOT_LINE.format(host=host, port=port), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM."""
    p = argparse.ArgumentParser(prog="rocketpy.tools.grpc_floor", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    args = p.parse_args(argv)
    run_loop(lambda: _serve(args.host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
