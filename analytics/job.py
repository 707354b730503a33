"""The Spark side of the throughput job: read dumps, compute the tables.

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
    base: DataFrame | None = None
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


def flatten(raw: DataFrame, window_ms: int) -> DataFrame:
    """One row per good record with the columns the tables need."""
    return raw.filter(~F.col("_bad")).select(
        F.coalesce(F.col("node.cluster"), F.lit("")).alias("cluster"),
        F.col("node.brokerName").alias("broker"),
        F.col("node.brokerId").alias("broker_id"),
        F.col("node.masterEpoch").alias("master_epoch"),
        F.col("ts"),
        F.col("intervalMs").alias("interval_ms"),
        (F.floor(F.col("ts") / window_ms) * window_ms).alias("window_ms"),
        *(F.coalesce(F.col(f"totals.{c}"), F.lit(0)).alias(c) for c in _DELTA_COLS),
        F.col("topics"),
        F.col("sendLatency.dCounts").alias("lat_counts"),
        F.coalesce(F.col("sendLatency.dMaxMs"), F.lit(0.0)).alias("lat_max"),
        F.col("events"),
        F.col("consumerLag").alias("lags"),
        F.col("ha.slaves").alias("slaves"),
        F.col("store.flushBehindBytes").alias("flush_behind"),
        F.col("store.dispatchBehindBytes").alias("dispatch_behind"),
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


def _read(spark: SparkSession, inputs: list[str]) -> tuple[DataFrame, int, int, list[float]]:
    """The parsed dumps (cached), good and corrupt line counts, the latency bounds."""
    parsed = (
        read_dumps(spark, inputs)
        .withColumn("_bad", _is_bad())
        .drop(CORRUPT_COLUMN)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    raw_counts = parsed.groupBy("_bad").count().collect()
    corrupt = sum(r["count"] for r in raw_counts if r["_bad"])
    records = sum(r["count"] for r in raw_counts if not r["_bad"])
    first = (
        parsed.filter(~F.col("_bad") & F.col("sendLatency.boundsMs").isNotNull())
        .select("sendLatency.boundsMs")
        .limit(1)
        .collect()
    )
    bounds = [float(x) for x in first[0][0]] if first else []
    return parsed, records, corrupt, bounds


def compute(spark: SparkSession, inputs: list[str], window_ms: int) -> JobResult:
    """Read ``inputs`` once (cached) and build every table. Each table is one pass over the
    cache and is itself cached (they are small: one row per window), so writing, summarizing
    and plotting do not recompute them."""
    parsed, records, corrupt, bounds = _read(spark, inputs)
    base = flatten(parsed, window_ms)
    result = JobResult(records=records, corrupt=corrupt, bounds=bounds, base=parsed)
    result.cached.append(parsed)

    def _cached(df: DataFrame) -> DataFrame:
        result.cached.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return df

    wkeys = [*KEYS, "window_ms"]
    slots = len(bounds) + 1 if bounds else 1
    per_window = _cached(
        base.groupBy(*wkeys).agg(
            *_sums(),
            F.max("flush_behind").alias("flush_behind_bytes"),
            merged_counts("lat_counts", slots).alias("lat_counts"),
            F.max("lat_max").alias("max_ms"),
        )
    )
    result.tables["broker_throughput"] = per_window.select(
        *wkeys, *_DELTA_COLS, *_rates(window_ms), "flush_behind_bytes"
    )
    if bounds:
        result.latency_per_window = per_window.select(*wkeys, "lat_counts", "max_ms")
        result.tables["latency"] = with_percentiles(result.latency_per_window, bounds).drop(
            "lat_counts"
        )
    topics = base.select(*wkeys, F.explode("topics").alias("t")).select(
        *wkeys, F.col("t.topic").alias("topic"), *(F.col(f"t.{c}").alias(c) for c in _DELTA_COLS)
    )
    result.tables["topic_throughput"] = _cached(
        topics.groupBy(*wkeys, "topic")
        .agg(*_sums())
        .select(*wkeys, "topic", *_DELTA_COLS, *_rates(window_ms))
    )
    lags = base.select(*wkeys, "ts", F.explode("lags").alias("l"))
    result.tables["consumer_lag"] = _cached(
        lags.groupBy(*wkeys, F.col("l.group").alias("group"), F.col("l.topic").alias("topic")).agg(
            F.max_by("l.lag", "ts").alias("lag_messages"), F.max("l.lag").alias("max_lag_messages")
        )
    )
    slaves = base.select(*wkeys, "ts", F.explode("slaves").alias("s"))
    result.tables["replication_lag"] = _cached(
        slaves.groupBy(*wkeys, F.col("s.brokerId").alias("slave_id")).agg(
            F.max_by("s.lagBytes", "ts").alias("lag_bytes"),
            F.max("s.lagBytes").alias("max_lag_bytes"),
        )
    )
    nodes = (
        base.groupBy(*KEYS, "broker_id", "master_epoch")
        .agg(
            F.min("ts").alias("ts"),
            F.flatten(F.collect_list(F.when(F.size("events") > 0, F.col("events")))).alias("ev"),
        )
        .collect()
    )
    result.epoch_bumps = _epoch_bumps([n.asDict() for n in nodes])
    changes = [
        {
            "cluster": n["cluster"],
            "broker": n["broker"],
            "broker_id": n["broker_id"],
            "event_ts": e["ts"],
            "from_role": e["fromRole"],
            "to_role": e["toRole"],
            "master_epoch": e["masterEpoch"],
        }
        for n in nodes
        for e in n["ev"] or ()
        if e["type"] == "ROLE_CHANGE"
    ]
    result.failovers = _failovers(spark, base, changes)
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
    spark: SparkSession, base: DataFrame, changes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Role changes to master (not at boot), with the put gap around each.

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
    active = base.filter(F.col("dPutMsgs") > 0).select(*KEYS, "ts", "interval_ms")
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
