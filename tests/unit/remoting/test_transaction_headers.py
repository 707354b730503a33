"""END_TRANSACTION and CHECK_TRANSACTION_STATE headers: upstream keys, mandatory fields, bounds."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.headers.base import MissingHeaderField, from_ext, to_ext
from rocketpy.remoting.protocol.headers.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)


def test_end_transaction_header_round_trip_with_java_keys() -> None:
    """The Java client's END_TRANSACTION extFields decode and encode back unchanged."""
    ext = {
        "topic": "T",
        "producerGroup": "pg",
        "tranStateTableOffset": "7",
        "commitLogOffset": "4096",
        "commitOrRollback": "8",
        "fromTransactionCheck": "true",
        "msgId": "AC1100",
        "transactionId": "AC1100",
        "bname": "broker-a",
    }
    header = from_ext(EndTransactionRequestHeader, ext)
    assert header.commit_or_rollback == 8
    assert header.from_transaction_check is True
    assert (header.tran_state_table_offset, header.commit_log_offset) == (7, 4096)
    assert dict(to_ext(header)) == ext


def test_end_transaction_header_mandatory_fields_and_int_bound() -> None:
    """A missing ``commitLogOffset`` names the field; ``commitOrRollback`` is a Java int."""
    ext = {
        "producerGroup": "pg",
        "tranStateTableOffset": "0",
        "commitOrRollback": "8",
        "msgId": "m",
    }
    with pytest.raises(MissingHeaderField, match="commitLogOffset"):
        from_ext(EndTransactionRequestHeader, ext)
    with pytest.raises(CodecError):
        from_ext(
            EndTransactionRequestHeader,
            {**ext, "commitLogOffset": "0", "commitOrRollback": str(2**31)},
        )


def test_check_transaction_state_header_round_trip() -> None:
    """CHECK_TRANSACTION_STATE's header as the broker sends it."""
    header = CheckTransactionStateRequestHeader(
        topic="RMQ_SYS_TRANS_HALF_TOPIC",
        tran_state_table_offset=3,
        commit_log_offset=512,
        msg_id="U",
        transaction_id="U",
        offset_msg_id="7F00000100002A9F0000000000000200",
        bname="broker-a",
    )
    ext = to_ext(header)
    assert ext["tranStateTableOffset"] == "3"
    assert ext["offsetMsgId"] == "7F00000100002A9F0000000000000200"
    assert from_ext(CheckTransactionStateRequestHeader, dict(ext)) == header
