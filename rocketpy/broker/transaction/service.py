"""TransactionalMessageService: the half and op queues of one broker, and the check scan.

Owns: reading a half message by commit-log offset for END_TRANSACTION, writing op messages
(``deletePrepareMessage``: one op message per ended half message, written at once), the record
of transactions ended during this run (a repeated END_TRANSACTION for one transaction, say a
late answer to an earlier check, stores nothing twice), and ``check``: walk the half queue from
the progress of ``CID_RMQ_SYS_TRANS`` against the op queue, put each half message that is past
its immunity and has no op message back at the end of the half queue with one more
``TRANSACTION_CHECK_TIMES`` and hand it to the listener (which asks its producer), discard what
was checked ``transactionCheckMax`` times or outlived ``fileReservedTime``, and commit both
queues' progress. Mirrors ``TransactionalMessageServiceImpl`` and ``TransactionalMessageBridge``
(5.3.x). Must not: talk to clients (``check_listener.py``) or decide a transaction's outcome.

Everything the scan needs is on disk: half and op messages in the CommitLog and their consume
queues, progress in ``consumerOffset.json``. A broker killed mid-scan restarts from the last
persisted progress; a half message seen again is matched against the op queue again.

Decided: the op queue is read in full (up to :data:`MAX_OPS_PER_ROUND`) before the half queue
is walked, so a half message with no op message is due as soon as it is past its immunity
(upstream reads ops 32 at a time and sleeps a second between reads while a half message is
undecided; the outcome is the same). A half message whose put-back fails ends the round, to be
retried next round.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import structlog

from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import StoredMessage
from rocketpy.broker.transaction import util
from rocketpy.common.errors import CodecError
from rocketpy.common.message.const import MessageConst
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult
from rocketpy.store.get_types import GetMessageStatus

log = structlog.get_logger(__name__)

Put = Callable[[MessageToStore], Awaitable[PutResult]]

#: ``MAX_PROCESS_TIME_LIMIT``: one queue's scan per round.
MAX_PROCESS_TIME_MS: Final = 60_000
MAX_OPS_PER_ROUND: Final = 100_000
_OP_BATCH: Final = 32
_YIELD_EVERY: Final = 256
_READ_BYTES: Final = 4 * 1024 * 1024
_END_OF_QUEUE: Final = frozenset(
    {
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.OFFSET_OVERFLOW_ONE,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    }
)
#: Transactions remembered as ended (by transaction id).
_ENDED_CAPACITY: Final = 65_536


@dataclass(slots=True)
class _OpState:
    """What the op queue says for one half queue (``fillOpRemoveMap``'s three collections)."""

    #: half queue offset -> the op message's queue offset that removes it
    remove: dict[int, int] = field(default_factory=dict)
    #: op queue offset -> half offsets of it not yet passed by the walk
    pending: dict[int, set[int]] = field(default_factory=dict)
    #: op queue offsets fully used
    done: list[int] = field(default_factory=list)

    def passed(self, half_offset: int, op_offset: int) -> None:
        """The walk passed ``half_offset``, which op message ``op_offset`` removed."""
        pending = self.pending.get(op_offset)
        if pending is None:
            return
        pending.discard(half_offset)
        if not pending:
            del self.pending[op_offset]
            self.done.append(op_offset)


class TransactionalMessageService:
    """Half/op queues and the check scan of one broker."""

    def __init__(
        self,
        rt: BrokerRuntime,
        *,
        put: Put,
        file_reserved_time_hours: int = 72,
    ) -> None:
        """Args: ``rt`` the shared broker state (store, offsets, clock, store host); ``put``
        stores a message and counts it (the broker's internal put); ``file_reserved_time_hours``
        ``fileReservedTime`` (a half message older than that is discarded, ``needSkip``)."""
        self._rt = rt
        self._put = put
        self._reserved_ms = file_reserved_time_hours * 3_600_000
        self._ended: OrderedDict[str, int] = OrderedDict()

    # -- END_TRANSACTION side ------------------------------------------------------------

    def look_half(self, commit_log_offset: int) -> StoredMessage | None:
        """``lookMessageByOffset``: the half message at ``commit_log_offset``, or None when
        there is no readable record there or it is not a half message."""
        if commit_log_offset < 0:
            return None
        try:
            msg = self._rt.store.look_message_by_offset(commit_log_offset)
        except (CodecError, ValueError, IndexError):
            return None
        if msg is None or msg.topic != util.HALF_TOPIC:
            return None
        return msg

    def ended(self, transaction_id: str) -> int | None:
        """The transaction type a transaction was ended with during this run, if it was."""
        return self._ended.get(transaction_id)

    def mark_ended(self, transaction_id: str, transaction_type: int) -> None:
        """Remember that ``transaction_id`` ended (commit or rollback)."""
        self._ended[transaction_id] = transaction_type
        self._ended.move_to_end(transaction_id)
        while len(self._ended) > _ENDED_CAPACITY:
            self._ended.popitem(last=False)

    async def put(self, msg: MessageToStore) -> PutResult:
        """Store ``msg`` through the broker's internal put."""
        return await self._put(msg)

    async def delete_prepare_message(self, half: StoredMessage) -> bool:
        """``deletePrepareMessage``: write the op message that marks ``half`` as ended."""
        rt = self._rt
        now = rt.clock.wall_ms()
        msg = util.op_message(
            f"{half.queue_offset}{util.OFFSET_SEPARATOR}",
            half.queue_id,
            rt.uniq_ids.create(now),
            now,
            rt.store_host,
        )
        result = await self._put(msg)
        if not result.stored:
            log.error(
                "Transaction op message write failed",
                queue_id=half.queue_id,
                half_offset=half.queue_offset,
                status=result.status.value,
            )
        return result.stored

    # -- check -----------------------------------------------------------------------------

    def _progress(self, topic: str, queue_id: int) -> int:
        """``fetchConsumeOffset``: the committed progress, else the queue's min offset."""
        rt = self._rt
        offset = rt.offsets.query_offset(util.CID_SYS_RMQ_TRANS, topic, queue_id)
        return offset if offset >= 0 else rt.store.min_offset_in_queue(topic, queue_id)

    def _commit(self, topic: str, queue_id: int, offset: int) -> None:
        host, port = self._rt.store_host
        self._rt.offsets.commit_offset(
            f"{host}:{port}", util.CID_SYS_RMQ_TRANS, topic, queue_id, offset
        )

    def _read(
        self, topic: str, queue_id: int, offset: int, nums: int
    ) -> tuple[GetMessageStatus, int, list[StoredMessage]]:
        store = self._rt.store
        result = store.get_message(
            util.CID_SYS_RMQ_TRANS,
            topic,
            queue_id,
            offset,
            max_msg_nums=nums,
            max_total_bytes=_READ_BYTES,
            tags_codes=None,
        )
        msgs: list[StoredMessage] = []
        for record in result.records:
            try:
                msgs.append(store.decode_message(record))
            except CodecError:
                log.exception("undecodable transaction record", topic=topic, offset=offset)
        return result.status, result.next_begin_offset, msgs

    async def _fill_ops(self, queue_id: int, op_offset: int, half_offset: int) -> _OpState:
        """``fillOpRemoveMap``, over every op message from ``op_offset`` on."""
        state = _OpState()
        offset = op_offset
        read = 0
        while read < MAX_OPS_PER_ROUND:
            status, next_offset, msgs = self._read(util.OP_TOPIC, queue_id, offset, _OP_BATCH)
            if status != GetMessageStatus.FOUND or not msgs:
                break
            for op in msgs:
                halves: set[int] = set()
                if op.properties.get(MessageConst.TAGS) == util.REMOVE_TAG:
                    for half in util.parse_op_body(op.body):
                        if half >= half_offset:
                            state.remove[half] = op.queue_offset
                            halves.add(half)
                else:
                    log.error("Found a illegal tag in opMessageExt", offset=op.queue_offset)
                if halves:
                    state.pending[op.queue_offset] = halves
                else:
                    state.done.append(op.queue_offset)
            read += len(msgs)
            if next_offset <= offset:
                break
            offset = next_offset
            await asyncio.sleep(0)  # a long op queue must not hold the loop
        return state

    async def check(
        self,
        transaction_timeout_ms: int,
        check_max: int,
        on_check: Callable[[StoredMessage], Awaitable[None]],
        on_discard: Callable[[StoredMessage], Awaitable[None]],
    ) -> int:
        """One check round over every half queue.

        Args:
            transaction_timeout_ms: ``transactionTimeOut``: a half message younger than this
                (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) is not checked yet.
            check_max: ``transactionCheckMax``.
            on_check: the put-back copy of a due half message (``resolveHalfMsg``).
            on_discard: a half message checked too often or too old (``resolveDiscardMsg``).

        Returns:
            How many half messages were handed to ``on_check``.
        """
        config = self._rt.topics.select(util.HALF_TOPIC)
        queues = config.read_queue_nums if config is not None else 1
        checked = 0
        for queue_id in range(queues):
            checked += await self._check_queue(
                queue_id, transaction_timeout_ms, check_max, on_check, on_discard
            )
        return checked

    async def _check_queue(
        self,
        queue_id: int,
        timeout_ms: int,
        check_max: int,
        on_check: Callable[[StoredMessage], Awaitable[None]],
        on_discard: Callable[[StoredMessage], Awaitable[None]],
    ) -> int:
        clock = self._rt.clock
        start = clock.wall_ms()
        deadline = clock.monotonic_ms() + MAX_PROCESS_TIME_MS
        half_offset = self._progress(util.HALF_TOPIC, queue_id)
        op_offset = self._progress(util.OP_TOPIC, queue_id)
        ops = await self._fill_ops(queue_id, op_offset, half_offset)
        i = half_offset
        checked = 0
        while clock.monotonic_ms() < deadline:
            if (i - half_offset) % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)  # nor a long half queue
            op = ops.remove.pop(i, None)
            if op is not None:
                ops.passed(i, op)
                i += 1
                continue
            status, next_offset, msgs = self._read(util.HALF_TOPIC, queue_id, i, 1)
            if status != GetMessageStatus.FOUND or not msgs:
                if status in _END_OF_QUEUE or next_offset <= i:
                    break
                log.info("Illegal offset, the miss offset", offset=i, next=next_offset)
                i = next_offset
                continue
            outcome = await self._visit(msgs[0], ops, start, timeout_ms, check_max, on_discard)
            if outcome is None:
                break
            if outcome is not msgs[0]:
                checked += 1
                await on_check(outcome)
            i += 1
        if i != half_offset:
            self._commit(util.HALF_TOPIC, queue_id, i)
        new_op_offset = _calculate_op_offset(ops.done, op_offset)
        if new_op_offset != op_offset:
            self._commit(util.OP_TOPIC, queue_id, new_op_offset)
        return checked

    async def _visit(  # noqa: PLR0917 - the scan's state, passed down
        self,
        half: StoredMessage,
        ops: _OpState,
        start: int,
        timeout_ms: int,
        check_max: int,
        on_discard: Callable[[StoredMessage], Awaitable[None]],
    ) -> StoredMessage | None:
        """One undecided half message of the walk: None to end the round here (not due yet, or
        its put-back failed), ``half`` itself to pass it (discarded, or immune and handled),
        else its put-back copy, which is to be checked."""
        times = util.next_check_times(half.properties, check_max)
        now = self._rt.clock.wall_ms()
        if times is None or now - half.born_timestamp > self._reserved_ms:
            await on_discard(half)
            return half
        if half.store_timestamp >= start:
            return None  # fresh stored: check it later
        age = now - half.born_timestamp
        immunity_text = half.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
        if immunity_text is not None:
            if age <= util.immunity_time_ms(immunity_text, timeout_ms):
                return half if await self._immune(ops, half) else None
        elif 0 <= age <= timeout_ms:
            return None  # new arrived: check it later
        props = dict(half.properties)
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(times)
        copy = await self._put_back(half, props)
        if copy is not None:
            log.info(
                "Check transaction",
                real_topic=half.properties.get(MessageConst.REAL_TOPIC),
                uniq_key=half.properties.get(MessageConst.UNIQ_KEY),
                offset=copy.queue_offset,
                commit_log_offset=copy.commit_log_offset,
            )
        return copy

    async def _immune(self, ops: _OpState, half: StoredMessage) -> bool:
        """``checkPrepareQueueOffset``: a half message still within its custom immunity. True
        when it may be passed over: its original (``TRAN_PREPARED_QUEUE_OFFSET``) was ended,
        or a copy carrying that offset was put back for later."""
        text = half.properties.get(MessageConst.TRAN_PREPARED_QUEUE_OFFSET)
        props = dict(half.properties)
        if text is None:
            props[MessageConst.TRAN_PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
            return await self._put_back(half, props) is not None
        try:
            prepared = int(text)
        except ValueError:
            prepared = -1
        if prepared == -1:
            return False
        op = ops.remove.pop(prepared, None)
        if op is not None:
            ops.done.append(op)
            return True
        return await self._put_back(half, props) is not None

    async def _put_back(self, half: StoredMessage, props: dict[str, str]) -> StoredMessage | None:
        """``putBackHalfMsgQueue``: the half message stored again; the stored copy, or None."""
        result = await self._put(util.renew_half(half, props))
        if not result.stored:
            log.error(
                "PutBackToHalfQueueReturnResult write failed",
                queue_id=half.queue_id,
                status=result.status.value,
            )
            return None
        copy = self._rt.store.look_message_by_offset(result.wrote_offset)
        if copy is None:
            log.error("put-back half message not readable", offset=result.wrote_offset)
        return copy


def _calculate_op_offset(done: list[int], old: int) -> int:
    """``calculateOpOffset``: past the op messages fully used, contiguously from ``old``."""
    new = old
    for offset in sorted(done):
        if offset == new:
            new += 1
        elif offset > new:
            break
    return new
