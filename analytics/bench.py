"""``make bench-analytics``: generate a large dump set, run the Spark job on it, compare with a
plain-Python single pass over the same files.

Usage::

    python -m analytics.bench [--records 5000000] [--groups 25] [--dir DIR] [--keep]
        [--master local[*]] [--window 10s]

Generates ``--records`` schema-version-1 records (masters with puts, gets, lag and one slave's
replication lag; slaves idle; one failover in broker group 0 half-way) from byte templates in two
worker processes, one file set per broker, 1 s apart. Then times, in the same run: the plain-Python
pass (``orjson.loads`` every line, sum puts per broker and window, count corrupt lines) and the
Spark job (``analytics.throughput.run``: every table, Parquet, summary and plots). Prints
records/s of both.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import BinaryIO

import orjson

from analytics.synth import LATENCY_BOUNDS_MS

START_MS = 1_700_000_000_000
FILE_RECORDS = 200_000

_BOUNDS = orjson.dumps(LATENCY_BOUNDS_MS).decode()
_MASTER = (
    '{"version":1,"ts":%(ts)d,"bootTs":%(boot)d,"node":{"type":"broker","cluster":"bench",'
    '"brokerName":"%(name)s","brokerId":%(id)d,"role":"%(role)s","addr":"10.0.0.%(host)d:10911",'
    '"masterEpoch":%(epoch)d},"intervalMs":1000,"totals":{"putMsgs":%(pm)d,"putBytes":%(pb)d,'
    '"getMsgs":%(gm)d,"getBytes":%(gb)d,"dPutMsgs":%(dpm)d,"dPutBytes":%(dpb)d,"dGetMsgs":%(dgm)d,'
    '"dGetBytes":%(dgb)d},"topics":[{"topic":"Topic%(t)d","putMsgs":%(pm)d,"putBytes":%(pb)d,'
    '"getMsgs":%(gm)d,"getBytes":%(gb)d,"dPutMsgs":%(dpm)d,"dPutBytes":%(dpb)d,"dGetMsgs":%(dgm)d,'
    '"dGetBytes":%(dgb)d}],"queues":[{"topic":"Topic%(t)d","queueId":0,"putMsgs":%(pm)d,'
    '"putBytes":%(pb)d,"getMsgs":%(gm)d,"getBytes":%(gb)d,"dPutMsgs":%(dpm)d,"dPutBytes":%(dpb)d,'
    '"dGetMsgs":%(dgm)d,"dGetBytes":%(dgb)d}],"sendLatency":{"boundsMs":' + _BOUNDS + ","
    '"counts":[0,%(c1)d,0,%(c3)d,0,0,%(c6)d,0,0,0,0,0,0,0,0],"sumMs":%(sum)d.0,'
    '"dCounts":[0,%(d1)d,0,%(d3)d,0,0,%(d6)d,0,0,0,0,0,0,0,0],"dSumMs":%(dsum)d.0,'
    '"dMaxMs":%(max)d.5},"events":[%(events)s],"store":{"maxPhyOffset":%(pb)d,'
    '"flushedPhyOffset":%(pb)d,"flushBehindBytes":0,"dispatchBehindBytes":%(disp)d},'
    '"consumerLag":[{"group":"G%(t)d","topic":"Topic%(t)d","lag":%(lag)d}],"ha":{"slaves":'
    '[{"brokerId":1,"addr":"10.0.1.%(host)d:10911","ackOffset":%(ack)d,"lagBytes":%(rlag)d}],'
    '"syncStateSet":[0,1],"syncStateSetEpoch":1,"confirmOffset":%(ack)d}}\n'
)
_SLAVE = (
    '{"version":1,"ts":%(ts)d,"bootTs":%(boot)d,"node":{"type":"broker","cluster":"bench",'
    '"brokerName":"%(name)s","brokerId":1,"role":"SLAVE","addr":"10.0.1.%(host)d:10911",'
    '"masterEpoch":%(epoch)d},"intervalMs":1000,"totals":{"putMsgs":0,"putBytes":0,"getMsgs":0,'
    '"getBytes":0,"dPutMsgs":0,"dPutBytes":0,"dGetMsgs":0,"dGetBytes":0},"topics":[],"queues":[],'
    '"sendLatency":{"boundsMs":' + _BOUNDS + ',"counts":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],'
    '"sumMs":0.0,"dCounts":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"dSumMs":0.0,"dMaxMs":0.0},'
    '"events":[],"store":{"maxPhyOffset":%(phy)d,"flushedPhyOffset":%(phy)d,"flushBehindBytes":0,'
    '"dispatchBehindBytes":0},"consumerLag":[],"ha":{"slaves":[],"syncStateSet":null,'
    '"syncStateSetEpoch":null,"confirmOffset":null}}\n'
)
_EVENT = '{"ts":%d,"type":"ROLE_CHANGE","fromRole":"SLAVE","toRole":"SYNC_MASTER","masterEpoch":2}'


def _write_group(args: tuple[Path, int, int]) -> tuple[int, int]:
    """All records of broker group ``g``: ``n`` intervals of master + slave. Returns (records,
    bytes)."""
    directory, g, n = args
    name = f"broker-{g:03d}"
    fail_at = n // 2 if g == 0 else -1
    written = lines = 0
    m = {"pm": 0, "pb": 0, "gm": 0, "gb": 0, "c1": 0, "c3": 0, "c6": 0, "sum": 0}
    files: dict[int, BinaryIO] = {}
    for i in range(n):
        ts = START_MS + (i + 1) * 1000
        if i % FILE_RECORDS == 0:
            for bid in (0, 1):
                if bid in files:
                    files[bid].close()
                path = directory / f"broker-{name}-{bid}.{i // FILE_RECORDS:010d}.jsonl"
                files[bid] = path.open("wb")
        dead = 0 <= fail_at <= i
        promoted = fail_at >= 0 and i > fail_at + 5
        rate = 800 + (i * 7 + g * 13) % 400
        if not dead or promoted:
            bid = 1 if promoted else 0
            d1, d3, d6 = rate * 8 // 10, rate // 10, rate - rate * 8 // 10 - rate // 10
            for k, v in (
                ("pm", rate),
                ("pb", rate * 1024),
                ("gm", rate - 5),
                ("gb", (rate - 5) * 1100),
            ):
                m[k] += v
            m["c1"] += d1
            m["c3"] += d3
            m["c6"] += d6
            dsum = d1 + d3 * 4 + d6 * 30
            m["sum"] += dsum
            line = _MASTER % {
                **m, "ts": ts, "boot": START_MS, "name": name, "id": bid, "host": g % 250,
                "role": "SYNC_MASTER", "epoch": 2 if promoted else 1, "dpm": rate,
                "dpb": rate * 1024, "dgm": rate - 5, "dgb": (rate - 5) * 1100, "t": g % 10,
                "d1": d1, "d3": d3, "d6": d6, "dsum": dsum, "max": 20 + i % 30,
                "events": _EVENT % (ts - 500) if promoted and i == fail_at + 6 else "",
                "disp": (i * 31) % 5000, "lag": (i * 17) % 10_000, "ack": m["pb"],
                "rlag": 0 if promoted else (i * 101) % 65_536,
            }  # fmt: skip
            written += files[bid].write(line.encode())
            lines += 1
        if not promoted:
            line = _SLAVE % {"ts": ts, "boot": START_MS, "name": name, "host": g % 250,
                             "epoch": 1, "phy": m["pb"]}  # fmt: skip
            written += files[1].write(line.encode())
            lines += 1
    for f in files.values():
        f.close()
    return lines, written


def generate(directory: Path, records: int, groups: int) -> tuple[int, int]:
    """Write about ``records`` records for ``groups`` broker groups; returns (records, bytes)."""
    # group 0's failover drops about half of one broker's records: ask for a little more
    per_group = max(1, math.ceil(records / (2 * groups - 0.5)) + 10)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        sizes = pool.map(_write_group, [(directory, g, per_group) for g in range(groups)])
    return sum(n for n, _ in sizes), sum(b for _, b in sizes)


def plain_python_pass(directory: Path, window_ms: int) -> tuple[int, int, float]:
    """One pass: parse every line, sum dPutMsgs per (broker, window). Returns (records, corrupt,
    seconds)."""
    started = time.perf_counter()
    sums: dict[tuple[str, int], int] = defaultdict(int)
    good = bad = 0
    for path in sorted(directory.rglob("*.jsonl")):
        with path.open("rb") as f:
            for line in f:
                try:
                    rec = orjson.loads(line)
                    key = (rec["node"]["brokerName"], rec["ts"] // window_ms * window_ms)
                    sums[key] += rec["totals"]["dPutMsgs"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    bad += 1
                    continue
                good += 1
    return good, bad, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m analytics.bench")
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--groups", type=int, default=25)
    parser.add_argument("--dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--window", default="10s")
    args = parser.parse_args(argv)
    from analytics.throughput import parse_window, run, session  # noqa: PLC0415 - pyspark

    window_ms = parse_window(args.window)
    root = args.dir or Path(tempfile.mkdtemp(prefix="rocketpy-bench-"))
    data, out = root / "dumps", root / "report"
    data.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        count, size = generate(data, args.records, args.groups)
        print(
            f"generated {count:,} records, {size / 1e9:.2f} GB in {time.perf_counter() - t0:.1f}s"
        )
        good, bad, py_s = plain_python_pass(data, window_ms)
        print(
            f"plain Python single pass: {good:,} records ({bad} corrupt) in {py_s:.1f}s "
            f"= {good / py_s:,.0f} rec/s"
        )
        t1 = time.perf_counter()
        spark = session(args.master)
        spark.sparkContext.setLogLevel("ERROR")
        boot_s = time.perf_counter() - t1
        try:
            report = run(spark, [str(data)], out, window_ms)
        finally:
            spark.stop()
        res = report.result
        print(
            f"spark job ({args.master}): {res.records:,} records, {res.corrupt} corrupt, "
            f"{report.seconds:.1f}s = {res.records / report.seconds:,.0f} rec/s "
            f"(session start {boot_s:.1f}s not included)"
        )
        print("phases: " + ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items()))
        print(f"report: {report.summary_md}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
