"""The explicit Spark schema of a metrics-dump record (schema version 1, see README.md).

Only the fields the job uses are declared, so the JSON reader skips the rest (``queues``, the
cumulative counters, ``sendLatency.boundsMs``) instead of materializing them. ``_corrupt``
receives lines that are not JSON objects. :data:`BOUNDS_SCHEMA` reads only the bucket bounds.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

CORRUPT_COLUMN = "_corrupt"


def _struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])


_DELTAS = (
    ("dPutMsgs", LongType()),
    ("dPutBytes", LongType()),
    ("dGetMsgs", LongType()),
    ("dGetBytes", LongType()),
)

DUMP_SCHEMA = _struct(
    ("version", IntegerType()),
    ("ts", LongType()),
    ("intervalMs", LongType()),
    (
        "node",
        _struct(
            ("type", StringType()),
            ("controllerId", StringType()),
            ("cluster", StringType()),
            ("brokerName", StringType()),
            ("brokerId", LongType()),
            ("role", StringType()),
            ("masterEpoch", LongType()),
        ),
    ),
    ("totals", _struct(*_DELTAS)),
    ("topics", ArrayType(_struct(("topic", StringType()), *_DELTAS))),
    (
        "sendLatency",
        _struct(
            ("dCounts", ArrayType(LongType())),
            ("dMaxMs", DoubleType()),
        ),
    ),
    (
        "events",
        ArrayType(
            _struct(
                ("ts", LongType()),
                ("type", StringType()),
                ("fromRole", StringType()),
                ("toRole", StringType()),
                ("masterEpoch", LongType()),
                # controller ELECTION events
                ("cluster", StringType()),
                ("brokerName", StringType()),
                ("result", StringType()),
                ("masterBrokerId", LongType()),
            )
        ),
    ),
    (
        "store",
        _struct(
            ("flushBehindBytes", LongType()),
        ),
    ),
    (
        "consumerLag",
        ArrayType(_struct(("group", StringType()), ("topic", StringType()), ("lag", LongType()))),
    ),
    (
        "ha",
        _struct(
            (
                "slaves",
                ArrayType(
                    _struct(
                        ("brokerId", LongType()),
                        ("lagBytes", LongType()),
                    )
                ),
            ),
        ),
    ),
    (CORRUPT_COLUMN, StringType()),
)

BOUNDS_SCHEMA = _struct(("sendLatency", _struct(("boundsMs", ArrayType(DoubleType())))))
