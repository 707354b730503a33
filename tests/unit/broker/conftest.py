"""Fixtures for broker unit tests: a channel fake with real close/record behaviour."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketpy.remoting.protocol.command import RemotingCommand


class FakeChannel:
    """A channel with real close state; everything written to it is recorded."""

    def __init__(self, peer: str) -> None:
        self._peer = peer
        self.closed = False
        self.sent: list[RemotingCommand] = []

    @property
    def peer(self) -> str:
        return self._peer

    @property
    def is_closed(self) -> bool:
        return self.closed

    def send_response(self, response: RemotingCommand) -> None:
        if not self.closed:
            self.sent.append(response)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        raise ConnectionError("fake channel does not answer requests")

    def invoke_oneway(self, request: RemotingCommand) -> None:
        if not self.closed:
            self.sent.append(request)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def make_channel() -> Callable[[str], FakeChannel]:
    """Factory of :class:`FakeChannel` by peer address."""
    return FakeChannel
