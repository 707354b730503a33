"""``ServiceThread.wakeup`` / ``waitForRunning`` for the member's loops (the pusher's dispatchers
and ack checker, the follower's entry handler).

Owns: :class:`Wakeup`, a flag plus at most one sleeper: :meth:`Wakeup.set` marks it and wakes the
sleeper, :meth:`Wakeup.wait` returns at once when it is marked, else after a wake-up or
``timeout_s``, and clears the mark. Mirrors ``ServiceThread``'s ``hasNotified`` and
``waitPoint``. Must not: be awaited by more than one task (each loop owns its own).

Why not ``asyncio.Event`` under ``asyncio.timeout``: these loops sleep and wake once per push
answer and per append, and the timeout context (task lookup, a rescheduled timer and its
cancellation) cost more than the loop bodies; one future and one ``call_later`` do the same.
"""

from __future__ import annotations

import asyncio


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Wakeup:
    """A level-triggered wake-up for one sleeping loop."""

    __slots__ = ("_flag", "_loop", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None
        #: The sleeper's loop, taken at its first wait (asyncio.get_running_loop() is a
        #: getpid() system call, and these loops sleep once per push answer).
        self._loop: asyncio.AbstractEventLoop | None = None

    def set(self) -> None:
        """``wakeup``: mark, and wake the sleeper if there is one."""
        if self._flag:  # marked already: any sleeper was woken then (twice per append)
            return
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        """``waitForRunning``: until marked or ``timeout_s`` passed; then clear the mark."""
        if not self._flag:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            timer = loop.call_later(timeout_s, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        self._flag = False
