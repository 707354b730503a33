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

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

from analytics.schema import BOUNDS_SCHEMA, CORRUPT_COLUMN, DUMP_SCHEMA

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
    #: Successful controller elections (from controller dumps), oldest first.
    elections: list[dict[str, Any]] = field(default_factory=list)
    #: Controller records read (not counted in ``records``).
    controller_records: int = 0
    epoch_bumps: list[dict[str, Any]] = field(default_factory=list)


_READ_OPTIONS = {"recursiveFileLookup": "true", "pathGlobFilter": "*.jsonl"}


def read_dumps(spark: SparkSession, inputs: list[str]) -> DataFrame:
    """Every ``*.jsonl`` file under the given directories or globs, with the explicit schema;
    lines that are not JSON objects land in ``_corrupt``."""
    return (
        spark.read.schema(DUMP_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .options(**_READ_OPTIONS)
        .json(inputs)
    )


def _is_controller() -> Column:
    return F.coalesce(F.col("node.type") == "controller", F.lit(False))


def _is_bad() -> Column:
    return (
        F.col(CORRUPT_COLUMN).isNotNull()
        | F.col("ts").isNull()
        | (F.col("node.brokerName").isNull() & ~_is_controller())
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
    (running sums in ``cum``), as plain Spark SQL in a few projections (no UDF, and no
    higher-order function either: those run interpreted, these get generated code)."""
    b = F.array(*(F.lit(float(x)) for x in bounds))
    total = F.element_at(F.col(cum), -1)
    rank = F.lit(q) * total
    k = F.coalesce(
        *(
            F.when((F.get(F.col(cum), i) >= rank) & (F.get(F.col(counts), i) > 0), F.lit(i + 1))
            for i in range(len(bounds) + 1)
        ),
        F.lit(0),
    )
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
    slot = [F.get(F.col("lat_counts"), i) for i in range(len(bounds) + 1)]
    running = [slot[0]]
    for x in slot[1:]:
        running.append(running[-1] + x)
    cum = F.array(*running)
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
    """The latency bucket bounds of the first record that has them (reads little: the main pass
    does not parse ``boundsMs`` at all, doubles being the slowest JSON values to parse)."""
    row = (
        spark.read.schema(BOUNDS_SCHEMA)
        .options(**_READ_OPTIONS)
        .json(inputs)
        .filter(F.col("sendLatency.boundsMs").isNotNull())
        .select("sendLatency.boundsMs")
        .limit(1)
        .collect()
    )
    return [float(x) for x in row[0][0]] if row else []


_FACT = (
    "kind STRING, k1 STRING, k2 STRING, kid BIGINT, w BIGINT, v0 BIGINT, v1 BIGINT, v2 BIGINT, "
    "v3 BIGINT, v4 BIGINT, lat ARRAY<BIGINT>, vmax DOUBLE, ts BIGINT, iv BIGINT, cl STRING, "
    "bk STRING"
)
_FIELDS = [f.split(" ", 1) for f in _FACT.split(", ")]


def _fact(kind: str, **cols: Column) -> Column:
    """One fact struct; fields not given are null."""
    values = [
        (cols[f] if f in cols else F.lit(kind) if f == "kind" else F.lit(None)).cast(t)
        for f, t in _FIELDS
    ]
    return F.struct(*(v.alias(f) for v, (f, _) in zip(values, _FIELDS, strict=True)))


def _facts(window_ms: int) -> Column:
    """Every fact one record contributes: its broker totals, latency and put activity (``b``;
    ``ts`` only when it has puts), topics (``t``), consumer lags (``l``), slaves (``s``), its
    master epoch and file (``e``) and role changes (``v``); a controller record contributes
    ``k`` and its successful elections (``c``, keyed by the elected broker group); a bad line
    contributes ``x``."""
    w = F.floor(F.col("ts") / window_ms) * window_ms
    bid, ts = F.col("node.brokerId"), F.col("ts")
    d = [F.coalesce(F.col(f"totals.{c}"), F.lit(0)) for c in _DELTA_COLS]
    one = F.array(
        _fact("b", w=w, v0=d[0], v1=d[1], v2=d[2], v3=d[3], v4=F.col("store.flushBehindBytes"),
              lat=F.col("sendLatency.dCounts"), vmax=F.col("sendLatency.dMaxMs"),
              ts=F.when(d[0] > 0, ts), iv=F.col("intervalMs")),
        _fact("e", kid=bid, k1=F.col("node.masterEpoch").cast("string"),
              k2=F.col("_metadata.file_path"), ts=ts),
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
        F.filter(F.coalesce(F.col("events"), F.array()), lambda e: e["type"] == "ROLE_CHANGE"),
        lambda e: _fact("v", kid=bid, k1=e["fromRole"], k2=e["toRole"], w=e["ts"],
                        v0=e["masterEpoch"], ts=ts),
    )  # fmt: skip
    good = F.concat(one, topics, lags, slaves, events)
    elections = F.transform(
        F.filter(
            F.coalesce(F.col("events"), F.array()),
            lambda e: (e["type"] == "ELECTION") & (e["result"] == "SUCCESS"),
        ),
        lambda e: _fact("c", cl=F.coalesce(e["cluster"], F.lit("")), bk=e["brokerName"],
                        k1=F.col("node.controllerId"), kid=e["masterBrokerId"], w=e["ts"],
                        v0=e["masterEpoch"], ts=ts),
    )  # fmt: skip
    controller = F.concat(F.array(_fact("k")), elections)
    return (
        F.when(F.col("_bad"), F.array(_fact("x")))
        .when(_is_controller(), controller)
        .otherwise(good)
    )


def _aggregate(spark: SparkSession, inputs: list[str], window_ms: int, slots: int) -> DataFrame:
    """The single pass: parse, explode facts, one aggregation by fact key."""
    raw = read_dumps(spark, inputs).withColumn("_bad", _is_bad())
    facts = raw.select(
        F.coalesce(F.col("node.cluster"), F.lit("")).alias("_cluster"),
        F.col("node.brokerName").alias("_broker"),
        F.explode(_facts(window_ms)).alias("f"),
    ).select(
        F.coalesce("f.cl", "_cluster").alias("cluster"),
        F.coalesce("f.bk", "_broker").alias("broker"),
        "f.*",
    )
    return facts.groupBy("kind", "cluster", "broker", "k1", "k2", "kid", "w").agg(
        F.count(F.lit(1)).alias("cnt"),
        *(F.sum(f"v{i}").alias(f"s{i}") for i in range(4)),
        F.max("v4").alias("max4"),
        merged_counts("lat", slots).alias("lat_counts"),
        F.coalesce(F.max("vmax"), F.lit(0.0)).alias("max_ms"),
        F.max_by("v0", "ts").alias("last0"),
        F.max("v0").alias("max0"),
        F.min("ts").alias("min_ts"),
        F.max("ts").alias("max_ts"),
        F.min_by("iv", "ts").alias("first_iv"),
    )


def compute(spark: SparkSession, inputs: list[str], window_ms: int) -> JobResult:
    """Read ``inputs`` in one pass into one small cached aggregate; every table is a slice of
    it (caching the parsed records themselves costs several times the parse)."""
    bounds = _bounds(spark, inputs)
    agg = _aggregate(spark, inputs, window_ms, len(bounds) + 1 if bounds else 1)
    agg = agg.persist(StorageLevel.MEMORY_AND_DISK)
    counts = {r["kind"]: r["n"] for r in agg.groupBy("kind").agg(F.sum("cnt").alias("n")).collect()}
    result = JobResult(records=counts.get("b", 0), corrupt=counts.get("x", 0), bounds=bounds)
    result.controller_records = counts.get("k", 0)
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
    seen = kind("e").select(*KEYS, "kid", "k1", "k2", "min_ts", "max_ts").collect()
    first_seen: dict[tuple[str, str, int, str], int] = {}
    files: dict[tuple[str, str], list[tuple[str, int, int]]] = defaultdict(list)
    for r in seen:
        files[(r["cluster"], r["broker"])].append((r["k2"], r["min_ts"], r["max_ts"]))
        if r["k1"] is not None:
            key = (r["cluster"], r["broker"], r["kid"], r["k1"])
            first_seen[key] = min(first_seen.get(key, r["min_ts"]), r["min_ts"])
    result.epoch_bumps = _epoch_bumps(
        [
            {"cluster": c, "broker": b, "broker_id": i, "master_epoch": int(e), "ts": t}
            for (c, b, i, e), t in first_seen.items()
        ]
    )
    changes = [
        {"cluster": r["cluster"], "broker": r["broker"], "broker_id": r["kid"],
         "event_ts": r["window_ms"], "from_role": r["k1"], "to_role": r["k2"],
         "master_epoch": r["last0"]}
        for r in kind("v").collect()
        for _ in range(r["cnt"])
    ]  # fmt: skip
    result.elections = sorted(
        (
            {"cluster": r["cluster"], "broker": r["broker"], "event_ts": r["window_ms"],
             "controller_id": r["k1"], "master_broker_id": r["kid"], "master_epoch": r["last0"]}
            for r in kind("c").collect()
        ),
        key=lambda e: e["event_ts"],
    )  # fmt: skip
    activity = kind("b").filter(F.col("min_ts").isNotNull())
    result.failovers = _failovers(spark, activity, changes, files, window_ms)
    _attach_elections(result.failovers, result.elections)
    return result


def _attach_elections(changes: list[dict[str, Any]], elections: list[dict[str, Any]]) -> None:
    """Each role change to master gets the controller election that made it (same broker group,
    broker id and master epoch): ``election_ts`` and ``controller_id``, None without one (classic
    mode, or no controller dumps among the inputs)."""
    by_key = {
        (e["cluster"], e["broker"], e["master_broker_id"], e["master_epoch"]): e for e in elections
    }
    for c in changes:
        if c["to_role"] not in MASTER_ROLES:
            continue
        e = by_key.get((c["cluster"], c["broker"], c["broker_id"], c["master_epoch"]))
        c["election_ts"] = e["event_ts"] if e else None
        c["controller_id"] = e["controller_id"] if e else None


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
    spark: SparkSession,
    activity: DataFrame,
    changes: list[dict[str, Any]],
    files: dict[tuple[str, str], list[tuple[str, int, int]]],
    window_ms: int,
) -> list[dict[str, Any]]:
    """Role changes to master (not at boot), with the put gap around each.

    The gap starts at the ``ts`` of the broker group's last record with puts at or before the
    change and ends where the first interval with puts after it begins (its ``ts`` minus its
    ``intervalMs``); its length is the difference. ``activity`` has, per broker group and window
    with puts, the first and last put record's ``ts`` (``min_ts``, ``max_ts``) and the first's
    interval (``first_iv``): enough unless the change falls inside a window with puts on both
    sides of it; only then are that window's records of that group read again, from the files
    ``files`` says hold them (the change itself is rare, so this costs little).
    """
    failovers = [c for c in changes if c["from_role"] is not None and c["to_role"] in MASTER_ROLES]
    groups = {(f["cluster"], f["broker"]) for f in failovers}
    cond = F.lit(False)
    for cluster, broker in groups:
        cond = cond | ((F.col("cluster") == cluster) & (F.col("broker") == broker))
    windows: dict[tuple[str, str], list[Row]] = defaultdict(list)
    if groups:
        for r in (
            activity.filter(cond)
            .select(*KEYS, "window_ms", "min_ts", "max_ts", "first_iv")
            .collect()
        ):
            windows[(r["cluster"], r["broker"])].append(r)
    for f in failovers:
        event = f["event_ts"]
        rows = windows[(f["cluster"], f["broker"])]
        before = [r["max_ts"] for r in rows if r["max_ts"] <= event]
        after = [(r["min_ts"], r["first_iv"] or 0) for r in rows if r["min_ts"] > event]
        straddle = [r for r in rows if r["min_ts"] <= event < r["max_ts"]]
        if straddle:
            puts = _puts_in_window(spark, f, straddle[0]["window_ms"], window_ms, files)
            before += [t for t, _ in puts if t <= event]
            after += [(t, iv) for t, iv in puts if t > event]
        start = max(before) if before else None
        first = min(after) if after else None
        end = first[0] - first[1] if first is not None else None
        f.update(gap_start_ms=start, gap_end_ms=end)
        f["gap_ms"] = end - start if start is not None and end is not None else None
    return sorted(changes, key=lambda c: c["event_ts"])


def _puts_in_window(
    spark: SparkSession,
    change: dict[str, Any],
    start: int,
    window_ms: int,
    files: dict[tuple[str, str], list[tuple[str, int, int]]],
) -> list[tuple[int, int]]:
    """(ts, intervalMs) of the change's broker group's records with puts in the window at
    ``start``, read again from the files holding that group's records of that time."""
    end = start + window_ms
    paths = sorted(
        {
            p
            for p, lo, hi in files[(change["cluster"], change["broker"])]
            if lo < end and hi >= start
        }
    )
    if not paths:
        return []
    rows = (
        read_dumps(spark, paths)
        .filter((F.col("ts") >= start) & (F.col("ts") < end))
        .filter(F.col("node.brokerName") == change["broker"])
        .filter(F.coalesce(F.col("node.cluster"), F.lit("")) == change["cluster"])
        .filter(~_is_bad() & (F.col("totals.dPutMsgs") > 0))
        .select("ts", F.coalesce(F.col("intervalMs"), F.lit(0)).alias("iv"))
        .collect()
    )
    return [(r["ts"], r["iv"]) for r in rows]
