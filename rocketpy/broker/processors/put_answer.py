"""A send answered from its put's future, with no coroutine (DLedger mode's quorum wait).

Owns: :func:`answer_when_put`, which turns the future of a :class:`PutResult` (the store's
``put_soon``: appended now, acknowledged later) into the future of the send's response, which the
connection answers from a done callback (``remoting/transport/dispatch.py``). Upstream's
``asyncPutMessage`` does the same with ``CompletableFuture.thenApply``. Must not: wait, or know
what the response holds (the caller's ``answer`` builds it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import AnswerFuture
from rocketpy.store.commit_log.put_types import PutResult


def answer_when_put(
    put: asyncio.Future[PutResult],
    answer: Callable[[PutResult], RemotingCommand | bytes],
    on_answered: Callable[[], None],
) -> AnswerFuture:
    """The future of ``answer(result)`` (the response, or its frame) once ``put`` has its
    result; ``on_answered`` runs then (the send-latency record). A failed ``put`` (or ``answer``)
    fails the response future, which the dispatcher maps to an error response; a cancelled one
    cancels it."""
    # put's own loop: asyncio.get_running_loop() costs a getpid() system call per send.
    response: AnswerFuture = put.get_loop().create_future()

    def settled(done: asyncio.Future[PutResult]) -> None:
        if response.done():
            return
        if done.cancelled():
            response.cancel()
            return
        try:
            response.set_result(answer(done.result()))
        except Exception as e:  # noqa: BLE001 - the dispatcher maps it to a response
            response.set_exception(e)
        on_answered()

    put.add_done_callback(settled)
    return response
