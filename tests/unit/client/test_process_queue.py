"""ProcessQueue bookkeeping (committable offset, orderly batches, flow control) and OffsetCell."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.client.message import MessageExt, MessageQueue
from rocketpy.client.offset_store import OffsetCell
from rocketpy.client.rebalance import ProcessQueue
from tests.helpers.client_messages import message_at

_MQ = MessageQueue(topic="T", broker_name="b", queue_id=0)


def _msg(offset: int) -> MessageExt:
    return message_at(offset, body=b"")


def test_process_queue_commits_smallest_outstanding_offset() -> None:
    """1. Put offsets 10..14 (filtered gaps are allowed: 16, 20 too). 2. Consume 11, 12, then 10,
    then 14, 16, 20, then 13.
    Expected: -1 before anything is held; the committable offset stays 10 while 10 is held, then
    13, still 13, and after the last one one past the largest pulled (21)."""
    pq = ProcessQueue(_MQ, 10, threshold=100)
    assert pq.remove([_msg(10)]) == -1
    msgs = {o: _msg(o) for o in (10, 11, 12, 13, 14, 16, 20)}
    pq.put(msgs.values())
    assert len(pq) == 7
    assert pq.remove([msgs[11], msgs[12]]) == 10
    assert pq.remove([msgs[10]]) == 13
    assert pq.remove([msgs[14], msgs[16], msgs[20]]) == 13
    assert pq.remove([msgs[13]]) == 21
    assert len(pq) == 0
    assert not pq.has_msgs.is_set()


def test_process_queue_first_is_offset_order_and_threshold_blocks_pulls() -> None:
    """1. Threshold 3. Put 5, 6 then 7, 8 (an older 4 arrives late). 2. Ask for the first 3.
    3. Remove two.
    Expected: first() gives 4, 5, 6; pulling is blocked (space cleared) at 5 held and allowed
    again below 3; the committable offset is 6."""
    pq = ProcessQueue(_MQ, 5, threshold=3)
    pq.put([_msg(5), _msg(6)])
    assert pq.space.is_set()
    pq.put([_msg(7), _msg(8), _msg(4)])
    assert not pq.space.is_set()
    assert [m.queue_offset for m in pq.first(3)] == [4, 5, 6]
    assert pq.remove([_msg(4), _msg(5)]) == 6
    assert not pq.space.is_set()
    assert pq.remove([_msg(7)]) == 6
    assert pq.space.is_set()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 200), min_size=1, max_size=60, unique=True).map(sorted),
    st.randoms(use_true_random=False),
)
def test_process_queue_commit_offset_matches_min_of_held(
    offsets: list[int], rnd: random.Random
) -> None:
    """1. Put ascending offsets in two pulls. 2. Remove them one at a time in random order.
    Expected: after each removal the result is min(held), or max+1 when none is held."""
    pq = ProcessQueue(_MQ, 0, threshold=1000)
    half = len(offsets) // 2
    pq.put([_msg(o) for o in offsets[:half]])
    pq.put([_msg(o) for o in offsets[half:]])
    order = list(offsets)
    rnd.shuffle(order)
    held = set(offsets)
    for o in order:
        held.discard(o)
        assert pq.remove([_msg(o)]) == (min(held) if held else offsets[-1] + 1)


def test_offset_cell_advances_only_upward() -> None:
    """Expected: a new cell is -1; advance keeps the larger value."""
    cell = OffsetCell()
    assert cell.value == -1
    cell.advance(5)
    cell.advance(3)
    assert cell.value == 5
