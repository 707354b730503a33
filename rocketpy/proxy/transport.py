"""How the proxy's backend reaches NameServers and brokers: one interface, remoting by default.

Owns: :class:`BrokerTransport` (invoke, oneway, close, by address) and :class:`RemotingTransport`
(``rocketpy``'s remoting client, whose connections also carry the requests brokers send back:
CHECK_TRANSACTION_STATE, dispatched into the registry the backend passes). Cluster mode uses it
for everything; Local mode (``mqbroker --enable-proxy``) passes a transport that calls its own
broker's processors in-process (``rocketpy/cli/local_proxy.py``), as upstream's
``LocalMessageService`` hands ``RemotingCommand``s to the processors over a ``SimpleChannel``.
Must not: import the broker, or know gRPC.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry


class BrokerTransport(Protocol):
    """Requests to a NameServer or broker by ``host:port``."""

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """Send ``request`` and await its response.

        Raises:
            RequestTimeout: no response within ``timeout_s``.
            ConnectionClosed: the peer cannot be reached or went away.
        """
        ...

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send a oneway request (no response)."""
        ...

    async def close(self) -> None:
        """Release every connection (idempotent)."""
        ...


#: Builds a transport whose peers' requests (a broker's CHECK_TRANSACTION_STATE) go to the
#: given registry.
TransportFactory = Callable[[ProcessorRegistry], BrokerTransport]


class RemotingTransport:
    """Every address over remoting (``MQClientAPIFactory``'s clients)."""

    def __init__(self, registry: ProcessorRegistry) -> None:
        self._client = RemotingClient(
            name="proxy", registry=registry, reconnect_backoff=(0.05, 1.0)
        )

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """See :meth:`BrokerTransport.invoke`."""
        return await self._client.invoke(addr, request, timeout_s)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """See :meth:`BrokerTransport.invoke_oneway`."""
        await self._client.invoke_oneway(addr, request)

    async def close(self) -> None:
        """See :meth:`BrokerTransport.close`."""
        await self._client.close()
