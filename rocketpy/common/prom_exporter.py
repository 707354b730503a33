"""A minimal Prometheus endpoint on the event loop, shared by the broker and the proxy.

Owns: :class:`PromExporter`, an HTTP/1.1 server answering ``GET /metrics`` (any path) with the
text format of one ``prometheus_client`` collector. Serving on the loop means a scrape reads the
counters between two loop steps, with no thread racing the code that bumps them. Must not: count
anything or name metrics (the broker's ``BrokerCollector``, the proxy's ``ProxyCollector``).
Plays the part of upstream's OpenTelemetry ``PrometheusHttpServer``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import structlog
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

log = structlog.get_logger(__name__)

_HEAD_LIMIT: Final = 8192
_READ_TIMEOUT_S: Final = 5.0
#: The classic text format every Prometheus version scrapes (our names need no escaping).
CONTENT_TYPE: Final = b"text/plain; version=0.0.4; charset=utf-8"


class PromExporter:
    """``GET /metrics`` over HTTP/1.1 on the event loop; one response per connection."""

    def __init__(self, collector: Collector, *, host: str, port: int) -> None:
        """Args: ``collector`` to expose; ``host``/``port`` to bind (0: any free port)."""
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        """The bound port (the configured one before :meth:`start`)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._handle, self._host, self._port, limit=_HEAD_LIMIT
        )
        log.info("metrics prometheus exporter started", host=self._host, port=self.port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
                method = head.split(b" ", 1)[0]
                if method in (b"GET", b"HEAD"):
                    body = generate_latest(self.registry)
                    status = b"200 OK"
                    ctype = CONTENT_TYPE
                else:
                    body, status, ctype = (
                        b"method not allowed\n",
                        b"405 Method Not Allowed",
                        b"text/plain",
                    )
                writer.write(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\nContent-Type: "
                    + ctype
                    + b"\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\nConnection: close\r\n\r\n"
                    + (body if method != b"HEAD" else b"")
                )
                await writer.drain()
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a slow, broken or oversized request: just close the connection
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def stop(self) -> None:
        """Stop listening and close open connections. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._writers):
            writer.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await server.wait_closed()
