"""The history checker itself (tests/helpers/history.py): it passes a correct history and names
each kind of broken one (lossy, phantom, duplicated, reordered)."""

from __future__ import annotations

import pytest

from tests.helpers.history import History, Outcome


def _good() -> History:
    """k1, k2 acked on queue 0; k3 unknown then retried OK on queue 1; k4 failed, never stored."""
    h = History()
    h.send("k1", 0, Outcome.OK, 0)
    h.send("k2", 0, Outcome.OK, 1)
    h.send("k3", 1, Outcome.UNKNOWN)
    h.send("k3", 1, Outcome.OK, 1)
    h.send("k4", 1, Outcome.FAILED)
    for key, q, off in (("k1", 0, 0), ("k2", 0, 1), ("k3", 1, 0), ("k3", 1, 1)):
        h.consume(key, q, off)
    return h


def test_history_correct_run_has_no_violation() -> None:
    """1. Record acked sends, an unknown send retried (stored twice) and a failed send; consume
    every stored message in queue order. Expected: no violation; summary counts 3 ok, 1 failed,
    1 unknown, 4 keys, 4 consumed."""
    h = _good()
    assert h.check() == []
    s = h.summary()
    assert (s.ok, s.failed, s.unknown, s.keys, s.consumed) == (3, 1, 1, 4, 4)


def test_history_acked_message_missing_is_lost() -> None:
    """1. Record k1, k2 acked on queue 0; consume only k1. Expected: one 'lost' naming k2."""
    h = History()
    h.send("k1", 0, Outcome.OK, 0)
    h.send("k2", 0, Outcome.OK, 1)
    h.consume("k1", 0, 0)
    kinds = [(v.kind, "k2" in v.detail) for v in h.check()]
    assert kinds == [("lost", True)]


def test_history_acked_offset_overwritten_is_lost() -> None:
    """1. k1 acked at queue 0 offset 0; after a failover the consumer reads k9 (an unknown send)
    at 0/0 and k1 at 0/1 (the acked position was reused by another message). Expected: 'lost'."""
    h = History()
    h.send("k1", 0, Outcome.OK, 0)
    h.send("k9", 0, Outcome.UNKNOWN)
    h.consume("k9", 0, 0)
    h.consume("k1", 0, 1)
    assert [v.kind for v in h.check()] == ["lost"]


def test_history_never_sent_message_is_phantom() -> None:
    """1. Consume a key no attempt sent. Expected: one 'phantom'."""
    h = _good()
    h.consume("ghost", 0, 2)
    assert [v.kind for v in h.check()] == ["phantom"]


def test_history_copy_without_retry_is_duplicate() -> None:
    """1. k1 sent once (OK), consumed at two positions. Expected: one 'duplicate'."""
    h = History()
    h.send("k1", 0, Outcome.OK, 0)
    h.consume("k1", 0, 0)
    h.consume("k1", 0, 1)
    assert [v.kind for v in h.check()] == ["duplicate"]


@pytest.mark.parametrize("offsets", [(1, 0), (0, 0)])
def test_history_offsets_not_increasing_is_order(offsets: tuple[int, int]) -> None:
    """1. Two messages of queue 0 read with offsets going back (or repeating). Expected: an
    'order' violation."""
    h = History()
    h.send("k1", 0, Outcome.UNKNOWN)
    h.send("k2", 0, Outcome.UNKNOWN)
    h.consume("k1", 0, offsets[0])
    h.consume("k2", 0, offsets[1])
    assert "order" in [v.kind for v in h.check()]


def test_history_message_in_wrong_queue_is_order() -> None:
    """1. k1 sent to queue 0 is read from queue 1. Expected: an 'order' violation."""
    h = History()
    h.send("k1", 0, Outcome.UNKNOWN)
    h.consume("k1", 1, 0)
    assert [v.kind for v in h.check()] == ["order"]


def test_history_ok_without_offset_is_refused() -> None:
    """1. Record SEND_OK without a queue offset. Expected: ValueError (the checker needs it)."""
    with pytest.raises(ValueError, match="without a queue offset"):
        History().send("k1", 0, Outcome.OK)


def test_history_two_masters_acking_one_offset_is_split_brain() -> None:
    """1. k1 acked at 0/0 by the old master, k2 acked at 0/0 by a new one (two masters of one
    epoch); the consumer reads k2 there. Expected: 'split-brain' naming both brokers, and k1
    'lost'."""
    h = History()
    h.send("k1", 0, Outcome.OK, 0, broker="10.0.0.1:10911")
    h.send("k2", 0, Outcome.OK, 0, broker="10.0.0.2:10911")
    h.consume("k2", 0, 0)
    found = h.check()
    assert [v.kind for v in found] == ["split-brain", "lost"]
    assert "10.0.0.1:10911" in found[0].detail
    assert "10.0.0.2:10911" in found[0].detail
