"""The broker's ``enableTopicMessageTypeCheck`` on the send path, over the in-memory store."""

from __future__ import annotations

from collections.abc import Callable

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.config_shapes import TopicConfig
from tests.unit.broker.support import Harness
from tests.unit.broker.test_send_processor import v2

MakeHarness = Callable[..., Harness]
FIFO_PROPS = {"UNIQ_KEY": "U1", "WAIT": "true", "__SHARDINGKEY": "order-1"}
NORMAL_PROPS = {"UNIQ_KEY": "U2", "WAIT": "true"}


def _typed(h: Harness, topic: str, message_type: str | None) -> None:
    modification = {"+message.type": message_type} if message_type else {}
    h.rt.topics.update(
        TopicConfig(topic_name=topic, read_queue_nums=2, write_queue_nums=2), modification
    )


async def _send(h: Harness, topic: str, props: dict[str, str]) -> tuple[int, str | None]:
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2(topic, props=props), b"x")
    assert resp is not None
    return resp.code, resp.remark


async def test_type_check_refuses_mismatch_and_accepts_match(harness: MakeHarness) -> None:
    """1. Topics F (FIFO), N (no attribute), M (MIXED) with the check on.
    2. Send a FIFO and a NORMAL message to each; a NORMAL one to unknown topic U.
    Expected: F takes only FIFO, N only NORMAL, M both; a refusal is MESSAGE_ILLEGAL with the
    validator's remark and stores nothing; U is refused as UNSPECIFIED and not auto-created."""
    h = harness(enableTopicMessageTypeCheck=True, enableMixedMessageType=True)
    _typed(h, "F", "FIFO")
    _typed(h, "N", None)
    _typed(h, "M", "MIXED")
    assert (await _send(h, "F", FIFO_PROPS))[0] == ResponseCode.SUCCESS
    assert await _send(h, "F", NORMAL_PROPS) == (
        ResponseCode.MESSAGE_ILLEGAL,
        "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL",
    )
    assert (await _send(h, "N", NORMAL_PROPS))[0] == ResponseCode.SUCCESS
    assert await _send(h, "N", FIFO_PROPS) == (
        ResponseCode.MESSAGE_ILLEGAL,
        "TopicMessageType validate failed, the expected type is NORMAL, but actual type is FIFO",
    )
    assert (await _send(h, "M", FIFO_PROPS))[0] == ResponseCode.SUCCESS
    assert (await _send(h, "M", NORMAL_PROPS))[0] == ResponseCode.SUCCESS
    assert await _send(h, "U", NORMAL_PROPS) == (
        ResponseCode.MESSAGE_ILLEGAL,
        "TopicMessageType validate failed, the expected type is UNSPECIFIED, "
        "but actual type is NORMAL",
    )
    assert h.rt.topics.select("U") is None
    stored = {t: len(q) for (t, _), q in h.store.queues.items() if q}
    assert stored == {"F": 1, "N": 1, "M": 2}


async def test_type_check_skips_retry_dlq_and_transfer(harness: MakeHarness) -> None:
    """1. Check on; FIFO topic F. 2. A NORMAL message with TRANSFER_FLAG to F. 3. A NORMAL
    message to %RETRY%g.
    Expected: both accepted (upstream's proxy does not check either)."""
    h = harness(enableTopicMessageTypeCheck=True)
    _typed(h, "F", "FIFO")
    assert (await _send(h, "F", {**NORMAL_PROPS, "TRANSFER_FLAG": "true"}))[0] == (
        ResponseCode.SUCCESS
    )
    assert (await _send(h, "%RETRY%g", NORMAL_PROPS))[0] == ResponseCode.SUCCESS


async def test_type_check_off_by_default_and_switchable(harness: MakeHarness) -> None:
    """1. Default config: a NORMAL message to FIFO topic F. 2. The check switched on at run
    time (UPDATE_BROKER_CONFIG replaces rt.config). 3. The same send.
    Expected: accepted, then refused."""
    h = harness()
    _typed(h, "F", "FIFO")
    assert (await _send(h, "F", NORMAL_PROPS))[0] == ResponseCode.SUCCESS
    h.rt.config = h.rt.config.with_updates({"enableTopicMessageTypeCheck": "true"})
    assert (await _send(h, "F", NORMAL_PROPS))[0] == ResponseCode.MESSAGE_ILLEGAL


async def test_type_check_batch_uses_the_batch_properties(harness: MakeHarness) -> None:
    """A SEND_BATCH_MESSAGE whose header properties carry a sharding key goes to FIFO topic F
    and is refused by NORMAL topic N (the batch's own properties decide, as upstream)."""
    h = harness(enableTopicMessageTypeCheck=True)
    _typed(h, "F", "FIFO")
    _typed(h, "N", None)
    header = v2("N", props=FIFO_PROPS)
    resp = await h.call(RequestCode.SEND_BATCH_MESSAGE, header, b"")
    assert resp is not None
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert resp.remark is not None
    assert "expected type is NORMAL, but actual type is FIFO" in resp.remark
    header = v2("F", props=FIFO_PROPS)
    resp = await h.call(RequestCode.SEND_BATCH_MESSAGE, header, b"")
    assert resp is not None
    # past the type check: the empty batch body is what is refused now
    assert resp.remark is not None
    assert "TopicMessageType" not in resp.remark
