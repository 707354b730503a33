"""The Spark side of the throughput job: read dumps, compute the tables.

One pass: each record is parsed once and exploded into typed facts (broker totals and latency,
put activity, topics, consumer lags, slaves, master epoch, events) that a single aggregation
reduces; only that small aggregate is cached, and every table is a slice of it.

Every table is keyed by cluster and broker group (``brokerName``; a group's master and slaves
are summed, so a failover shows as a dip in one line) and a UTC time window
(``window_ms`` = window start, ms). A record's interval deltas count in the window holding its
``ts``. Rates divide a window's summed deltas by the window length. Latency percentiles merge the
window's histograms element-wise and interpolate as :mod:`analytics.histogram` (same algorithm,
as Spark SQL expressions, so no Python UDF runs per row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

from analytics.schema import CORRUPT_COLUMN, DUMP_SCHEMA

MB = 1024 * 1024
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")
KEYS = ("cluster", "broker")


@dataclass
class JobResult:
    """The computed tables and counts."""

    records: int
    corrupt: int
    bounds: list[float]
    #: Per (cluster, broker, window): merged ``lat_counts`` and ``max_ms``.
    latency_per_window: DataFrame | None = None
    tables: dict[str, DataFrame] = field(default_factory=dict)
    #: Everything this run cached (unpersist when done).
    cached: list[DataFrame] = field(default_factory=list)
    failovers: list[dict[str, Any]] = field(default_factory=list)
    epoch_bumps: list[dict[str, Any]] = field(default_factory=list)


def read_dumps(spark: SparkSession, inputs: list[str]) -> DataFrame:
    """Every ``*.jsonl`` file under the given directories or globs, with the explicit schema;
    lines that are not JSON objects land in ``_corrupt``."""
    return (
        spark.read.schema(DUMP_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
        .json(inputs)
    )


def _is_bad() -> Column:
    return (
        F.col(CORRUPT_COLUMN).isNotNull()
        | F.col("ts").isNull()
        | F.col("node.brokerName").isNull()
        | (F.col("version") != 1)
        | F.col("version").isNull()
    )


_DELTA_COLS = ("dPutMsgs", "dPutBytes", "dGetMsgs", "dGetBytes")


def _rates(window_ms: int) -> list[Column]:
    secs = window_ms / 1000.0
    return [
        (F.col("dPutMsgs") / secs).alias("in_msgs_per_s"),
        (F.col("dPutBytes") / secs / MB).alias("in_mb_per_s"),
        (F.col("dGetMsgs") / secs).alias("out_msgs_per_s"),
        (F.col("dGetBytes") / secs / MB).alias("out_mb_per_s"),
    ]


def _sums() -> list[Column]:
    return [F.sum(c).alias(c) for c in _DELTA_COLS]


def with_quantile(
    df: DataFrame, name: str, q: float, *, counts: str, cum: str, max_col: str, bounds: list[float]
) -> DataFrame:
    """Adds column ``name``: :func:`analytics.histogram.quantile` of array column ``counts``
    (running sums in ``cum``), as plain Spark SQL in a few projections (no UDF)."""
    b = F.array(*(F.lit(float(x)) for x in bounds))
    total = F.element_at(F.col(cum), -1)
    rank = F.lit(q) * total
    k = F.array_position(
        F.zip_with(F.col(cum), F.col(counts), lambda c, n: (c >= rank) & (n > 0)), True
    ).cast("int")
    df = df.withColumn("_k", F.when(total > 0, k))
    lo = F.when(F.col("_k") == 1, F.lit(0.0)).otherwise(F.element_at(b, F.col("_k") - 1))
    df = df.withColumn("_lo", F.when(F.col("_k") > 0, lo))
    hi = F.when(F.col("_k") <= len(bounds), F.element_at(b, F.col("_k"))).otherwise(
        F.greatest(F.col(max_col), F.col("_lo"))
    )
    df = df.withColumn("_hi", F.when(F.col("_k") > 0, hi))
    n_k = F.element_at(F.col(counts), F.col("_k"))
    c_k = F.element_at(F.col(cum), F.col("_k"))
    df = df.withColumn("_n", F.when(F.col("_k") > 0, n_k)).withColumn(
        "_c", F.when(F.col("_k") > 0, c_k)
    )
    est = F.col("_lo") + (F.col("_hi") - F.col("_lo")) * (
        rank - (F.col("_c") - F.col("_n"))
    ) / F.col("_n")
    capped = F.when(F.col(max_col) > 0, F.least(est, F.col(max_col))).otherwise(est)
    return df.withColumn(name, F.when(F.col("_k") > 0, capped)).drop("_k", "_lo", "_hi", "_n", "_c")


def merged_counts(col: str, slots: int) -> Column:
    """Element-wise sum of the group's count arrays: one plain ``sum`` per slot, so Spark
    aggregates partially and with generated code (no collect_list, no lambdas)."""
    return F.array(
        *(F.coalesce(F.sum(F.get(F.col(col), i)), F.lit(0)).cast("long") for i in range(slots))
    )


def with_percentiles(merged: DataFrame, bounds: list[float]) -> DataFrame:
    """Adds ``sends``, ``p50_ms``, ``p99_ms`` to rows with merged ``lat_counts`` and ``max_ms``."""
    cum = F.expr(
        "transform(lat_counts, "
        "(x, i) -> aggregate(slice(lat_counts, 1, i + 1), 0L, (a, y) -> a + y))"
    )
    merged = merged.withColumn("lat_cum", cum).withColumn("sends", F.element_at("lat_cum", -1))
    for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99)):
        merged = with_quantile(
            merged, name, q, counts="lat_counts", cum="lat_cum", max_col="max_ms", bounds=bounds
        )
    return merged.drop("lat_cum")


def latency_table(per_window: DataFrame, keys: list[str], bounds: list[float]) -> DataFrame:
    """p50/p99/max send latency per ``keys`` (a subset of the per-window keys), merging the
    per-window histograms again."""
    merged = per_window.groupBy(*keys).agg(
        merged_counts("lat_counts", len(bounds) + 1).alias("lat_counts"),
        F.max("max_ms").alias("max_ms"),
    )
    return with_percentiles(merged, bounds).select(*keys, "sends", "p50_ms", "p99_ms", "max_ms")


def _bounds(spark: SparkSession, inputs: list[str]) -> list[float]:
    """The latency bucket bounds of the first record that has them (reads little)."""
    row = (
        read_dumps(spark, inputs)
        .filter(F.col("sendLatency.boundsMs").isNotNull())
        .select("sendLatency.boundsMs")
        .limit(1)
        .collect()
    )
    return [float(x) for x in row[0][0]] if row else []


_FACT = (
    "kind STRING, k1 STRING, k2 STRING, kid BIGINT, w BIGINT, v0 BIGINT, v1 BIGINT, v2 BIGINT, "
    "v3 BIGINT, v4 BIGINT, lat ARRAY<BIGINT>, vmax DOUBLE, ts BIGINT"
)


def _fact(kind: str, **cols: Column) -> Column:
    """One fact struct; fields not given are null."""
    fields = [f.split()[0] for f in _FACT.split(", ")]
    types = dict(f.split(" ", 1) for f in _FACT.split(", "))
    values = [
        (cols[f] if f in cols else F.lit(kind) if f == "kind" else F.lit(None)).cast(types[f])
        for f in fields
    ]
    return F.struct(*(v.alias(f) for v, f in zip(values, fields, strict=True)))


def _facts(window_ms: int) -> Column:
    """Every fact one record contributes: its broker totals and latency (``b``), put activity
    (``a``, keyed by ts, for failover gaps), topics (``t``), consumer lags (``l``), slaves
    (``s``), its master epoch (``e``) and events (``v``); a bad line contributes ``x``."""
    w = F.floor(F.col("ts") / window_ms) * window_ms
    bid, ts = F.col("node.brokerId"), F.col("ts")
    d = [F.coalesce(F.col(f"totals.{c}"), F.lit(0)) for c in _DELTA_COLS]
    one = F.array(
        _fact("b", w=w, v0=d[0], v1=d[1], v2=d[2], v3=d[3], v4=F.col("store.flushBehindBytes"),
              lat=F.col("sendLatency.dCounts"), vmax=F.col("sendLatency.dMaxMs"), ts=ts),
        _fact("a", w=ts, v0=d[0], v1=F.col("intervalMs"), ts=ts),
        _fact("e", kid=bid, k1=F.col("node.masterEpoch").cast("string"), ts=ts),
    )  # fmt: skip
    topics = F.transform(
        F.coalesce(F.col("topics"), F.array()),
        lambda t: _fact("t", k1=t["topic"], w=w, v0=t["dPutMsgs"], v1=t["dPutBytes"],
                        v2=t["dGetMsgs"], v3=t["dGetBytes"]),
    )  # fmt: skip
    lags = F.transform(
        F.coalesce(F.col("consumerLag"), F.array()),
        lambda x: _fact("l", k1=x["group"], k2=x["topic"], w=w, v0=x["lag"], ts=ts),
    )
    slaves = F.transform(
        F.coalesce(F.col("ha.slaves"), F.array()),
        lambda x: _fact("s", kid=x["brokerId"], w=w, v0=x["lagBytes"], ts=ts),
    )
    events = F.transform(
        F.coalesce(F.col("events"), F.array()),
        lambda e: _fact("v", kid=bid, k1=e["fromRole"], k2=e["toRole"], w=e["ts"],
                        v0=e["masterEpoch"], ts=ts, v1=F.when(e["type"] == "ROLE_CHANGE", 1)),
    )  # fmt: skip
    good = F.concat(one, topics, lags, slaves, events)
    return F.when(F.col("_bad"), F.array(_fact("x"))).otherwise(good)


def _aggregate(spark: SparkSession, inputs: list[str], window_ms: int, slots: int) -> DataFrame:
    """The single pass: parse, explode facts, one aggregation by fact key."""
    raw = read_dumps(spark, inputs).withColumn("_bad", _is_bad())
    facts = raw.select(
        F.coalesce(F.col("node.cluster"), F.lit("")).alias("cluster"),
        F.col("node.brokerName").alias("broker"),
        F.explode(_facts(window_ms)).alias("f"),
    ).select("cluster", "broker", "f.*")
    return facts.groupBy("kind", "cluster", "broker", "k1", "k2", "kid", "w").agg(
        F.count(F.lit(1)).alias("cnt"),
        *(F.sum(f"v{i}").alias(f"s{i}") for i in range(4)),
        F.max("v1").alias("max1"),
        F.max("v4").alias("max4"),
        merged_counts("lat", slots).alias("lat_counts"),
        F.coalesce(F.max("vmax"), F.lit(0.0)).alias("max_ms"),
        F.max_by("v0", "ts").alias("last0"),
        F.max("v0").alias("max0"),
        F.min("ts").alias("min_ts"),
    )


def compute(spark: SparkSession, inputs: list[str], window_ms: int) -> JobResult:
    """Read ``inputs`` in one pass into one small cached aggregate; every table is a slice of
    it (caching the parsed records themselves costs several times the parse)."""
    bounds = _bounds(spark, inputs)
    agg = _aggregate(spark, inputs, window_ms, len(bounds) + 1 if bounds else 1)
    agg = agg.persist(StorageLevel.MEMORY_AND_DISK)
    counts = {r["kind"]: r["n"] for r in agg.groupBy("kind").agg(F.sum("cnt").alias("n")).collect()}
    result = JobResult(records=counts.get("b", 0), corrupt=counts.get("x", 0), bounds=bounds)
    result.cached.append(agg)

    def kind(name: str) -> DataFrame:
        return agg.filter(F.col("kind") == name).withColumnRenamed("w", "window_ms")

    wkeys = [*KEYS, "window_ms"]
    sums = [F.col(f"s{i}").alias(c) for i, c in enumerate(_DELTA_COLS)]
    per_window = kind("b").select(*wkeys, *sums, F.col("max4").alias("flush_behind_bytes"),
                                  "lat_counts", "max_ms")  # fmt: skip
    result.tables["broker_throughput"] = per_window.select(
        *wkeys, *_DELTA_COLS, *_rates(window_ms), "flush_behind_bytes"
    )
    if bounds:
        result.latency_per_window = per_window.select(*wkeys, "lat_counts", "max_ms")
        result.tables["latency"] = with_percentiles(result.latency_per_window, bounds).drop(
            "lat_counts"
        )
    result.tables["topic_throughput"] = (
        kind("t")
        .select(*wkeys, F.col("k1").alias("topic"), *sums)
        .select(*wkeys, "topic", *_DELTA_COLS, *_rates(window_ms))
    )
    result.tables["consumer_lag"] = kind("l").select(
        *wkeys, F.col("k1").alias("group"), F.col("k2").alias("topic"),
        F.col("last0").alias("lag_messages"), F.col("max0").alias("max_lag_messages"),
    )  # fmt: skip
    result.tables["replication_lag"] = kind("s").select(
        *wkeys, F.col("kid").alias("slave_id"),
        F.col("last0").alias("lag_bytes"), F.col("max0").alias("max_lag_bytes"),
    )  # fmt: skip
    epochs = kind("e").filter(F.col("k1").isNotNull()).collect()
    result.epoch_bumps = _epoch_bumps(
        [
            {"cluster": r["cluster"], "broker": r["broker"], "broker_id": r["kid"],
             "master_epoch": int(r["k1"]), "ts": r["min_ts"]}
            for r in epochs
        ]
    )  # fmt: skip
    changes = [
        {"cluster": r["cluster"], "broker": r["broker"], "broker_id": r["kid"],
         "event_ts": r["window_ms"], "from_role": r["k1"], "to_role": r["k2"],
         "master_epoch": r["last0"]}
        for r in kind("v").filter(F.col("max1") == 1).collect()
        for _ in range(r["cnt"])
    ]  # fmt: skip
    active = (
        kind("a")
        .filter(F.col("s0") > 0)
        .select(*KEYS, F.col("window_ms").alias("ts"), F.col("max1").alias("interval_ms"))
    )
    result.failovers = _failovers(spark, active, changes)
    return result


def _epoch_bumps(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """First time each (broker group, broker id) reported each master epoch, after its first."""
    rows = sorted(
        (r for r in seen if r["master_epoch"] is not None),
        key=lambda r: (r["cluster"], r["broker"], r["ts"]),
    )
    out: list[dict[str, Any]] = []
    last: dict[tuple[str, str, int], int] = {}
    for r in rows:
        key = (r["cluster"], r["broker"], r["broker_id"])
        if key in last and r["master_epoch"] > last[key]:
            out.append(
                {k: r[k] for k in ("cluster", "broker", "broker_id", "master_epoch", "ts")}
                | {"from_epoch": last[key]}
            )
        last[key] = max(last.get(key, r["master_epoch"]), r["master_epoch"])
    return out


def _failovers(
    spark: SparkSession, active: DataFrame, changes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Role changes to master (not at boot), with the put gap around each; ``active`` has the
    broker groups' (ts, interval_ms) of records with puts.

    The gap starts at the ``ts`` of the broker group's last record with puts at or before the
    change and ends where the first interval with puts after it begins (its ``ts`` minus its
    ``intervalMs``); its length is the difference.
    """
    failovers = [c for c in changes if c["from_role"] is not None and c["to_role"] in MASTER_ROLES]
    if not failovers:
        return sorted(changes, key=lambda c: c["event_ts"])
    for i, f in enumerate(failovers):
        f["failover_id"] = i
    fdf = spark.createDataFrame(
        [(f["failover_id"], f["cluster"], f["broker"], f["event_ts"]) for f in failovers],
        "failover_id INT, cluster STRING, broker STRING, event_ts BIGINT",
    )
    gaps = (
        active.join(F.broadcast(fdf), list(KEYS))
        .groupBy("failover_id")
        .agg(
            F.max(F.when(F.col("ts") <= F.col("event_ts"), F.col("ts"))).alias("gap_start_ms"),
            F.min(
                F.when(
                    F.col("ts") > F.col("event_ts"),
                    F.struct("ts", F.coalesce("interval_ms", F.lit(0)).alias("iv")),
                )
            ).alias("after"),
        )
        .collect()
    )
    by_id = {g["failover_id"]: g for g in gaps}
    for f in failovers:
        g = by_id.get(f["failover_id"])
        start = g["gap_start_ms"] if g else None
        after = g["after"] if g else None
        end = after["ts"] - after["iv"] if after is not None else None
        f.update(gap_start_ms=start, gap_end_ms=end)
        f["gap_ms"] = end - start if start is not None and end is not None else None
    others = [c for c in changes if c not in failovers]
    return sorted([*failovers, *others], key=lambda c: c["event_ts"])
