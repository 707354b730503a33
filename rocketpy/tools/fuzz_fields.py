"""Hostile header fields and bodies for the fuzz tool's well-formed requests.

Owns: for a request code, a plausible ``extFields`` map (what a Java client would send) with a
few values swapped for hostile ones -- integers beyond Java's int and long, non-numbers, empty,
long, non-ASCII and separator-laden strings -- or dropped, plus a body that is sometimes valid
JSON, sometimes garbage. Must not: do I/O; name a real broker or touch a real broker's set
(broker and group names come from ``fuzz-*`` pools, so a fuzz run cannot unregister, elect or
clean the brokers it runs against). Pure and seed-determined (the caller's ``random.Random``).
"""

from __future__ import annotations

import random
from typing import Final

from rocketpy.common.codes import RequestCode

_NAMES: Final = tuple(f"fuzz-{i}" for i in range(8))
_TOPICS: Final = tuple(f"FuzzT{i}" for i in range(8))
_GROUPS: Final = tuple(f"FuzzG{i}" for i in range(4))
HOSTILE_VALUES: Final = (
    "", "0", "-1", "1", "true", "false", "null", "NaN", "1e9", " 7 ", "0x10", "+5", "--1",
    str(1 << 31), str(-(1 << 31) - 1), str(1 << 63), str(-(1 << 63) - 1), str(1 << 64),
    "9" * 40, "\u00e9\u4e2d\U0001f600", "\x00\x01\x02", "a\x01b\x02c", "%RETRY%g", "*",
    "TagA || TagB", "127.0.0.1:10911", "127.0.0.1:-1", "[]", "{}", "x" * 300, "y" * 5000,
)  # fmt: skip
_SEND_V1: Final = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                   "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes",
                   "unitMode", "batch", "maxReconsumeTimes")  # fmt: skip
#: Codes that create, delete or re-permission a topic: fuzz topics only, never ``topic``.
_CHANGES_TOPICS: Final = frozenset({17, 18, 215, 216, 217})
_ELECTIONS: Final = frozenset({1001, 1002})  # alter SyncStateSet, elect master
_BROKER_IDS: Final = frozenset({1004, 1011, 1012, 1013})  # replica info, clean, next/apply id
_BODIES: Final = (
    b"{}", b"[]", b"not json", b"null", b'{"topicConfigSerializeWrapper":7}',
    b'{"queueDatas":[{"brokerName":1}]}', b'{"clientID":"c","producerDataSet":[{}]}',
    b'{"mqSet":[{"topic":"FuzzT0","brokerName":"fuzz-0","queueId":-1}]}',
    b'{"offsetTable":{"x":1}}', b'{"syncStateSet":[1,2,99999999999]}', b'["broker-x"]',
)  # fmt: skip


class FieldMaker:
    """Plausible-then-mutated request fields for one seed."""

    def __init__(self, rng: random.Random, topic: str) -> None:
        self._rng = rng
        self._topic = topic
        self._props = "UNIQ_KEY\x01K1\x02TAGS\x01TagA\x02WAIT\x01true\x02"

    def _value(self) -> str:
        return self._rng.choice(HOSTILE_VALUES)

    def _topic_name(self) -> str:
        return self._rng.choice((self._topic, self._topic, *_TOPICS[:2], "", "a/b", "T" * 300))

    def remark(self) -> str | None:
        """Usually none; sometimes a string (requests rarely carry one)."""
        return None if self._rng.random() < 0.95 else self._value()

    def request(self, code: int) -> tuple[dict[str, str] | None, bytes | None]:
        """``extFields`` and body for ``code``: a plausible map, then 0-3 fields mutated."""
        rng = self._rng
        ext = self._plausible(code)
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            if ext and rng.random() < 0.2:
                del ext[rng.choice(list(ext))]
            elif ext and rng.random() < 0.8:
                ext[rng.choice(list(ext))] = self._value()
            else:
                ext[rng.choice(("topic", "brokerName", "queueId", "x", "\u00e9"))] = self._value()
        return (ext or None), self._body(code)

    def _body(self, code: int) -> bytes | None:
        rng = self._rng
        roll = rng.random()
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            return rng.randbytes(rng.choice((0, 1, 16, 200, 4100))) or None
        if roll < 0.5:
            return None
        if roll < 0.85:
            return rng.choice(_BODIES)
        return rng.randbytes(rng.randrange(1, 300))

    def _plausible(self, code: int) -> dict[str, str]:
        rng = self._rng
        name, queue = rng.choice(_NAMES), str(rng.choice((0, 1, 3, -1, 7)))
        if code == RequestCode.SEND_MESSAGE_V2:
            return {"a": rng.choice(_GROUPS), "b": self._topic_name(), "c": "TBW102", "d": "4",
                    "e": queue, "f": "0", "g": "1700000000000", "h": "0", "i": self._props,
                    "j": "0", "k": "false", "m": "false", "n": "broker-a"}  # fmt: skip
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE):
            values = (rng.choice(_GROUPS), self._topic_name(), "TBW102", "4", queue, "0",
                      "1700000000000", "0", self._props, "0", "false",
                      str(code == RequestCode.SEND_BATCH_MESSAGE).lower(), "16")  # fmt: skip
            return dict(zip(_SEND_V1, values, strict=True))
        if code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):
            return {"consumerGroup": rng.choice(_GROUPS), "topic": self._topic_name(),
                    "queueId": queue, "queueOffset": rng.choice(("0", "5", str(1 << 40))),
                    "maxMsgNums": rng.choice(("1", "32", str(1 << 31))),
                    "sysFlag": rng.choice(("0", "1", "2", "3", "4", "8")), "commitOffset": "0",
                    "suspendTimeoutMillis": rng.choice(("0", "20", "1000", str(1 << 40))),
                    "subscription": rng.choice(("*", "TagA", "a ||| b", "")), "subVersion": "0",
                    "expressionType": rng.choice(("TAG", "SQL92", "X"))}  # fmt: skip
        if code == RequestCode.REGISTER_BROKER:
            return {"brokerName": name, "brokerAddr": "127.0.0.1:1", "clusterName": "FuzzC",
                    "haServerAddr": "127.0.0.1:2", "brokerId": rng.choice(("0", "1")),
                    "compressed": rng.choice(("false", "true")), "bodyCrc32": "0"}  # fmt: skip
        if code in (RequestCode.CONTROLLER_REGISTER_BROKER, RequestCode.BROKER_HEARTBEAT):
            return {"clusterName": "FuzzC", "brokerName": name, "brokerAddr": "127.0.0.1:1",
                    "brokerAddress": "127.0.0.1:1", "brokerId": rng.choice(("1", "2", "-1")),
                    "epoch": "1", "maxOffset": "0", "confirmOffset": "0",
                    "heartbeatTimeoutMills": rng.choice(("1000", "-1", str(1 << 62))),
                    "invokeTime": "0"}  # fmt: skip
        if code in _ELECTIONS:
            epoch = rng.choice(("0", "1", str(1 << 31)))
            return {"clusterName": "FuzzC", "brokerName": name, "brokerId": queue,
                    "designateElect": rng.choice(("true", "false")), "masterBrokerId": "1",
                    "masterEpoch": epoch, "invokeTime": "0"}  # fmt: skip
        if code in _BROKER_IDS:
            check = f"127.0.0.1:1;{rng.randrange(1 << 40)}"
            return {"clusterName": "FuzzC", "brokerName": name, "appliedBrokerId": queue,
                    "registerCheckCode": check, "brokerControllerIdsToClean": "1;2",
                    "isCleanLivingBroker": "false"}  # fmt: skip
        return self._generic(code, name, queue)

    def _generic(self, code: int, name: str, queue: str) -> dict[str, str]:
        rng = self._rng
        mutating = code in _CHANGES_TOPICS or rng.random() < 0.5
        topic = rng.choice(_TOPICS) if mutating else self._topic_name()
        base = {"topic": topic, "brokerName": name, "clusterName": "FuzzC", "queueId": queue,
                "consumerGroup": rng.choice(_GROUPS), "group": rng.choice(_GROUPS),
                "namespace": "FuzzNS", "key": rng.choice(("k", "")), "value": "v",
                "offset": "0", "timestamp": "0", "commitOffset": "0", "maxNum": "32",
                "invisibleTime": "1000", "pollTime": "0", "bornTime": "0", "initMode": "0",
                "extraInfo": "0 0 0", "commitLogOffset": "0", "offsetMsgId": "00"}  # fmt: skip
        keys = rng.sample(list(base), rng.randrange(len(base) + 1))
        return {k: base[k] for k in keys}
