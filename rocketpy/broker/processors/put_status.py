"""What a send answers for each store outcome (``handlePutMessageResult``).

Owns: :data:`STORED_CODES` (the response code of each status whose message is stored) and
:func:`put_failure` (the code and remark of each refusal). Mirrors the switch in upstream's
``AbstractSendMessageProcessor.handlePutMessageResult``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from rocketpy.common.codes import ResponseCode
from rocketpy.store.commit_log.put_types import PutMessageStatus

_FAILURES: Final[Mapping[PutMessageStatus, tuple[int, str]]] = {
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the "
        "broker's disk is full, messages are put to the slave, message store has been shut down, "
        "etc.",
    ),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (
        ResponseCode.SYSTEM_ERROR,
        "in-sync replicas not enough",
    ),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}
STORED_CODES: Final[Mapping[PutMessageStatus, int]] = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


def put_failure(status: PutMessageStatus, illegal_remark: str) -> tuple[int, str]:
    """(response code, remark) for a status whose message was not stored; ``illegal_remark``
    answers MESSAGE_ILLEGAL and PROPERTIES_SIZE_EXCEEDED (it names the broker's size limits)."""
    if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
        return ResponseCode.MESSAGE_ILLEGAL, illegal_remark
    return _FAILURES.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
