"""The proxy's transaction records, END_TRANSACTION headers and the check-back message
(``TransactionDataManager``, ``genEndTransactionRequestHeader``, ``GrpcConverter.buildMessage``),
and consumer Settings under a group's config; no I/O."""

from __future__ import annotations

import hashlib

from rocketpy.client.message import MessageExt
from rocketpy.common.message.properties import encode_properties
from rocketpy.proxy.backend import GroupSettings
from rocketpy.proxy.client_settings import ClientRegistry
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.transaction import (
    COMMIT_TYPE,
    ROLLBACK_TYPE,
    TransactionDataManager,
    end_transaction_header,
    grpc_message,
)


def test_records_are_taken_once_and_expire() -> None:
    data = TransactionDataManager(expire_s=10, max_records=2)
    data.add("T", "broker-a", 5, 1000, "tx1", now=0)
    assert data.poll("T", "tx1", now=1) is not None
    assert data.poll("T", "tx1", now=1) is None  # taken
    data.add("T", "broker-a", 6, 2000, "tx2", now=0)
    assert data.poll("T", "tx2", now=10) is None  # expired
    assert data.poll("OTHER", "tx2", now=1) is None
    for i in range(3):
        data.add("T", "broker-a", i, i, f"x{i}", now=20)
    assert len(data) == 2  # the oldest went first
    assert data.poll("T", "x0", now=21) is None
    data.expire(now=31)
    assert len(data) == 0


def test_end_transaction_header_from_a_record() -> None:
    data = TransactionDataManager().add("T", "broker-a", 7, 4242, "tx", now=0)
    commit = end_transaction_header(
        "T", "T", data, "MSG", pb.TransactionResolution.COMMIT,
        pb.TransactionSource.SOURCE_SERVER_CHECK,
    )  # fmt: skip
    assert (commit.tran_state_table_offset, commit.commit_log_offset) == (7, 4242)
    assert (commit.commit_or_rollback, commit.from_transaction_check) == (COMMIT_TYPE, True)
    assert (commit.producer_group, commit.msg_id, commit.transaction_id) == ("T", "MSG", "tx")
    assert commit.bname == "broker-a"
    rollback = end_transaction_header(
        "T", "T", data, "MSG", pb.TransactionResolution.ROLLBACK,
        pb.TransactionSource.SOURCE_CLIENT,
    )  # fmt: skip
    assert (rollback.commit_or_rollback, rollback.from_transaction_check) == (ROLLBACK_TYPE, False)
    unknown = end_transaction_header(
        "T", "T", data, "MSG", pb.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED,
        pb.TransactionSource.SOURCE_CLIENT,
    )  # fmt: skip
    assert unknown.commit_or_rollback == 0


def test_checked_message_as_the_client_sees_it() -> None:
    props = {
        "UNIQ_KEY": "ID1", "TAGS": "TagA", "KEYS": "k1 k2", "TRAN_MSG": "true", "PGROUP": "T",
        "REAL_TOPIC": "T", "color": "red",
    }  # fmt: skip
    msg = MessageExt(
        topic="T", body=b"hello", properties=None, msg_id="ID1", offset_msg_id="X",
        broker_name="broker-a", queue_id=1, queue_offset=3, commit_log_offset=99, store_size=0,
        flag=0, sys_flag=4, born_timestamp=1_700_000_000_123, born_host=("10.0.0.5", 5555),
        store_timestamp=1_700_000_000_456, store_host=("10.0.0.1", 10911), reconsume_times=0,
        prepared_transaction_offset=0, properties_text=encode_properties(props),
    )  # fmt: skip
    got = grpc_message(msg)
    sp = got.system_properties
    assert (got.topic.name, got.body) == ("T", b"hello")
    assert (sp.message_id, sp.tag, list(sp.keys)) == ("ID1", "TagA", ["k1", "k2"])
    assert sp.message_type == pb.MessageType.TRANSACTION
    assert sp.body_digest.type == pb.DigestType.MD5
    assert sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()  # noqa: S324
    assert sp.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert (sp.born_host, sp.store_host) == ("10.0.0.5", "10.0.0.1:10911")
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt) == (1, 3, 1)
    assert dict(got.user_properties) == {"color": "red"}


def test_consumer_settings_follow_the_group_config() -> None:
    registry = ClientRegistry(idle_s=120)
    sent = pb.Settings(
        client_type=pb.ClientType.PUSH_CONSUMER,
        subscription=pb.Subscription(group=pb.Resource(name="G")),
    )
    orderly = registry.update("c1", sent, 0, GroupSettings(True, 3)).settings
    assert orderly.subscription.fifo is True
    assert orderly.backoff_policy.max_attempts == 4
    plain = registry.update("c2", sent, 0).settings
    assert plain.subscription.fifo is False
    assert plain.backoff_policy.max_attempts == 17
    # The group decides, not the client (mergeSubscriptionData sets both over its Settings).
    sent.subscription.fifo = True
    sent.backoff_policy.max_attempts = 1
    overridden = registry.update("c3", sent, 0, GroupSettings(False, 2)).settings
    assert overridden.subscription.fifo is False
    assert overridden.backoff_policy.max_attempts == 3
