"""Message property names (message-format.md section 3).

Owns: :class:`MessageConst`, the property keys client, broker and store read or write. Mirrors
``org.apache.rocketmq.common.message.MessageConst`` (upstream spells them ``PROPERTY_KEYS`` ..;
the attribute here drops the prefix). Pure.
"""

from __future__ import annotations

from typing import Final


class MessageConst:
    """Property keys (``MessageConst``)."""

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT: Final = "WAIT"
    DELAY: Final = "DELAY"
    UNIQ_KEY: Final = "UNIQ_KEY"  # PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    TRAN_MSG: Final = "TRAN_MSG"
    PGROUP: Final = "PGROUP"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QID: Final = "REAL_QID"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRAN_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    CLUSTER: Final = "CLUSTER"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_ON: Final = "TRACE_ON"
    POP_CK: Final = "POP_CK"
    MIN_OFFSET: Final = "MIN_OFFSET"
    MAX_OFFSET: Final = "MAX_OFFSET"
    # 5.x timer messages (``PROPERTY_TIMER_*``)
    TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    TIMER_OUT_MS: Final = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES: Final = "TIMER_ROLL_TIMES"
    TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
