"""The response-code error table: which refusals a client may send again."""

from __future__ import annotations

from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError, TopicNotExistError


def test_errors_retriable_codes_are_upstream_producer_retry_codes() -> None:
    """1. Build the error of every known response code.
    Expected: exactly DefaultMQProducer.retryResponseCodes, plus GO_AWAY and
    CONTROLLER_NOT_LEADER, are retriable (the producer retries by this flag)."""
    retriable = {code for code in ResponseCode if RemoteError.for_code(code).retriable}
    assert retriable == {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
        ResponseCode.GO_AWAY,
        ResponseCode.CONTROLLER_NOT_LEADER,
    }


def test_errors_for_code_picks_class_and_keeps_unknown_code() -> None:
    """1. Build the error of TOPIC_NOT_EXIST and of an unknown code.
    Expected: the specific class for the first; a plain, final RemoteError keeping the code."""
    assert isinstance(RemoteError.for_code(ResponseCode.TOPIC_NOT_EXIST, "x"), TopicNotExistError)
    unknown = RemoteError.for_code(99_999, "odd")
    assert type(unknown) is RemoteError
    assert (unknown.code, unknown.remark, unknown.retriable) == (99_999, "odd", False)
