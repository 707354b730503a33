"""A send answered once its put is acknowledged, with no coroutine and no future (DLedger
mode's quorum wait).

Owns: :func:`answer_when_put`, which makes the :class:`Deferred` a send's processor returns and
the ``on_result`` its store put (``put_then``) calls with the :class:`PutResult`: the response
is built and handed to the connection in that call, which the DLedger leader makes from the
quorum check in the read of the push answer that committed the entry. Upstream's
``asyncPutMessage`` does the same with ``CompletableFuture.thenApply``. Must not: wait, or know
what the response holds (the caller's ``answer`` builds it).

Why not a future: a future's done callback runs a loop turn later, and one scheduled from the
ready queue only after the next poll's reads; the put's future and the response's future cost a
send two such turns between its quorum and its SEND_OK.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Deferred
from rocketpy.store.commit_log.put_types import PutResult


def answer_when_put(
    answer: Callable[[PutResult], RemotingCommand | bytes],
    on_answered: Callable[[], None],
) -> tuple[Deferred, Callable[[PutResult], None]]:
    """The response's :class:`Deferred` and the ``on_result`` to give the put: it settles the
    Deferred with ``answer(result)`` (or the error ``answer`` raised, which the connection maps
    to an error response), then runs ``on_answered`` (the send-latency record)."""
    deferred = Deferred()

    def on_result(result: PutResult) -> None:
        try:
            deferred.settle(answer(result))
        except Exception as e:  # noqa: BLE001 - the connection maps it to a response
            deferred.settle(e)
        on_answered()

    return deferred, on_result
