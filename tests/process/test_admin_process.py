"""``bin/mqadmin`` broker commands as subprocesses against one real mqnamesrv + mqbroker.

One cluster per module (module-scoped fixture); the fixture creates topic ``AdminT`` with two
queues through ``mqadmin updateTopic`` and sends five messages with a Java-like client, so every
test reads known offsets. Tests that change state use their own topic or group.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient, subscription
from tests.helpers.processes import Daemon, run_bin, start_broker, start_namesrv

pytestmark = pytest.mark.process

TOPIC = "AdminT"
CLUSTER = "DefaultCluster"
# queue id of each message sent by the fixture, in send order
QUEUES = (0, 1, 0, 1, 0)


@dataclass
class Cluster:
    """The shared processes and what the fixture sent."""

    tmp: Path
    namesrv: str
    broker: str
    offset_ids: list[str]
    uniq_keys: list[str]

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``mqadmin <args> -n <namesrv>``."""
        return run_bin(["mqadmin", *args, "-n", self.namesrv], self.tmp)

    def ok(self, *args: str) -> list[str]:
        """Run mqadmin, assert exit 0, return the stdout lines."""
        out = self.admin(*args)
        assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
        return out.stdout.splitlines()

    def fails(self, *args: str, code: int = 1) -> str:
        """Run mqadmin, assert the exit code and a single stderr line; return that line."""
        out = self.admin(*args)
        assert out.returncode == code, f"{args}: {out.stdout}\n{out.stderr}"
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert "Traceback" not in out.stderr
        return lines[0]


def _rows(lines: list[str]) -> list[list[str]]:
    return [line.split() for line in lines if line.strip() and not line.startswith("#")]


async def _produce(addr: str) -> tuple[list[str], list[str]]:
    client = JavaLikeClient()
    offset_ids, uniq = [], []
    try:
        for i, qid in enumerate(QUEUES):
            resp = await client.send(
                addr, TOPIC, f"body-{i}".encode(), queue_id=qid, tags="TagA", keys=f"k{i} shared"
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            offset_ids.append(resp.ext("msgId") or "")
            uniq.append(resp.ext("transactionId") or "")
    finally:
        await client.close()
    return offset_ids, uniq


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("admin")
    daemons: list[Daemon] = []
    try:
        namesrv, ns_addr = start_namesrv(tmp)
        daemons.append(namesrv)
        broker, addr = start_broker(tmp, ns_addr)
        daemons.append(broker)
        made = Cluster(tmp, ns_addr, addr, [], [])
        made.ok("updateTopic", "-t", TOPIC, "-c", CLUSTER, "-r", "2", "-w", "2")
        made.offset_ids, made.uniq_keys = asyncio.run(_produce(addr))
        yield made
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


def test_admin_update_topic_and_topic_status(cluster: Cluster) -> None:
    """1. (fixture) updateTopic -c with -r 2 -w 2, then 5 sends (queues 0,1,0,1,0).
    2. topicStatus -t AdminT. 3. updateTopic -b with -p 4 -o true on a new topic.
    Expected: the fixture printed upstream's TopicConfig line; topicStatus lists queue 0 with max
    3 and queue 1 with max 2 plus a last-updated time; the -b update reports success with
    perm R-- and sets the order conf brokerName:writeQueueNums; topicRoute shows perm 4."""
    rows = _rows(cluster.ok("topicStatus", "-t", TOPIC))
    assert [r[:4] for r in rows[:2]] == [["broker-a", "0", "0", "3"], ["broker-a", "1", "0", "2"]]
    assert all(len(r) == 6 for r in rows[:2])  # date and time of the last update
    assert rows[2] == ["Topic", "Put", "TPS:", "0.0"]
    out = cluster.ok("updateTopic", "-t", "AdminOrder", "-b", cluster.broker, "-p", "4",
                     "-r", "3", "-w", "3", "-o", "true")  # fmt: skip
    assert out == [
        "set broker orderConf. isOrder=true, orderConf=[broker-a:3]",
        f"create topic to {cluster.broker} success.",
        "TopicConfig [topicName=AdminOrder, readQueueNums=3, writeQueueNums=3, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=true, attributes={}]",
    ]


def test_admin_update_topic_bad_input(cluster: Cluster) -> None:
    """1. updateTopic with neither -b nor -c. 2. with -p 3. 3. with an unknown cluster.
    4. with an invalid topic name. Expected: each exits non-zero (2 for usage) with one stderr
    line naming the problem and no traceback."""
    assert "one of the arguments -b/--brokerAddr -c/--clusterName is required" in cluster.fails(
        "updateTopic", "-t", "X", code=2
    )
    assert "invalid perm 3" in cluster.fails("updateTopic", "-t", "X", "-c", CLUSTER, "-p", "3")
    assert "cluster 'nope' not found" in cluster.fails("updateTopic", "-t", "X", "-c", "nope")
    assert "INVALID_PARAMETER" in cluster.fails("updateTopic", "-t", "bad topic", "-c", CLUSTER)


def test_admin_delete_topic(cluster: Cluster) -> None:
    """1. updateTopic AdminDel. 2. deleteTopic -t AdminDel -c DefaultCluster. 3. topicStatus.
    Expected: both upstream success lines; topicStatus then fails with TOPIC_NOT_EXIST on one
    line."""
    cluster.ok("updateTopic", "-t", "AdminDel", "-c", CLUSTER)
    assert cluster.ok("deleteTopic", "-t", "AdminDel", "-c", CLUSTER) == [
        f"delete topic [AdminDel] from cluster [{CLUSTER}] success.",
        "delete topic [AdminDel] from NameServer success.",
    ]
    assert "TOPIC_NOT_EXIST" in cluster.fails("topicStatus", "-t", "AdminDel")


def test_admin_broker_status_and_cluster_list(cluster: Cluster) -> None:
    """1. brokerStatus -b. 2. brokerStatus -c. 3. clusterList. 4. clusterList -m.
    Expected: -b prints sorted ``key: value`` lines with msgPutTotalTodayNow >= 5; -c prefixes
    each line with the address; clusterList has upstream's TPS header and the broker's row;
    -m shows InTotalToday >= 5."""
    lines = cluster.ok("brokerStatus", "-b", cluster.broker)
    stats = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    assert list(stats) == sorted(stats)
    assert int(stats["msgPutTotalTodayNow"]) >= len(QUEUES)
    assert stats["brokerVersionDesc"] == "V5_3_3"
    by_cluster = cluster.ok("brokerStatus", "-c", CLUSTER)
    assert by_cluster[0].split()[0] == cluster.broker
    base = cluster.ok("clusterList")
    assert base[0].split()[:7] == ["#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr",
                                   "#Version"]  # fmt: skip
    assert "#InTPS(LOAD)" in base[0]
    assert "#OutTPS(LOAD)" in base[0]
    assert base[1].split()[:4] == [CLUSTER, "broker-a", "0", cluster.broker]
    more = cluster.ok("clusterList", "-m", "-c", CLUSTER)
    assert more[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#InTotalYest",
                               "#OutTotalYest", "#InTotalToday", "#OutTotalToday"]  # fmt: skip
    row = more[1].split()
    assert row[:2] == [CLUSTER, "broker-a"]
    assert int(row[4]) >= len(QUEUES)


async def _register_group(addr: str, ns: str, group: str, commit: dict[int, int]) -> None:
    """Heartbeat as a consumer of TOPIC, commit offsets, wait until %RETRY%group is routable."""
    client = JavaLikeClient()
    try:
        await client.heartbeat(addr, group)
        for qid, offset in commit.items():
            ext = {"consumerGroup": group, "topic": TOPIC, "queueId": str(qid),
                   "commitOffset": str(offset)}  # fmt: skip
            resp = await client.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
            assert resp.code == ResponseCode.SUCCESS, resp.remark

        async def routable() -> bool:
            ext = {"topic": f"%RETRY%{group}"}
            resp = await client.call(ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
            return resp.code == ResponseCode.SUCCESS

        async with asyncio.timeout(10):
            while not await routable():
                await asyncio.sleep(0.05)
    finally:
        await client.close()


def test_admin_sub_group_consumer_progress_and_reset(cluster: Cluster) -> None:
    """1. updateSubGroup -g gp -c DefaultCluster -r 5. 2. A consumer of gp heartbeats and commits
    offset 1 on queue 0. 3. consumerProgress -g gp -t AdminT and without -t.
    4. resetOffsetByTime -s now. 5. consumerProgress again. 6. resetOffsetByTime with a
    yyyy-MM-dd#HH:mm:ss:SSS time in 2000 and with a bad time.
    Expected: updateSubGroup prints success and retryMaxTimes=5; progress rows are (broker 3,
    consumer 1, diff 2) and (2, 0, 2) with "Consume Diff Total: 4"; after the reset to now the
    reset table shows offsets 3 and 2 and the diff total is 0; the year-2000 reset goes back to
    0; the bad time fails on one line, and so does the progress of a group without a route."""
    out = cluster.ok("updateSubGroup", "-g", "gp", "-c", CLUSTER, "-r", "5")
    assert out[0] == f"create subscription group to {cluster.broker} success."
    assert "retryMaxTimes=5" in out[1]
    assert "consumeBroadcastEnable=false" in out[1]
    asyncio.run(_register_group(cluster.broker, cluster.namesrv, "gp", {0: 1}))
    for args in (("-t", TOPIC), ()):
        lines = cluster.ok("consumerProgress", "-g", "gp", *args)
        rows = _rows(lines)
        assert [r[:6] for r in rows[:2]] == [
            [TOPIC, "broker-a", "0", "3", "1", "2"],
            [TOPIC, "broker-a", "1", "2", "0", "2"],
        ]
        assert lines[-3:] == ["Consume TPS: 0.00", "Consume Diff Total: 4",
                              "Consume Inflight Total: 0"]  # fmt: skip
    reset = cluster.ok("resetOffsetByTime", "-g", "gp", "-t", TOPIC, "-s", "now")
    assert reset[0].startswith("start reset consumer offset by specified, group[gp], topic[AdminT]")
    assert _rows(reset[1:]) == [["broker-a", "0", "3"], ["broker-a", "1", "2"]]
    assert "Consume Diff Total: 0" in cluster.ok("consumerProgress", "-g", "gp", "-t", TOPIC)
    back = cluster.ok("resetOffsetByTime", "-g", "gp", "-t", TOPIC, "-s", "2000-01-01#00:00:00:000")
    assert _rows(back[1:]) == [["broker-a", "0", "0"], ["broker-a", "1", "0"]]
    assert "bad timestamp" in cluster.fails("resetOffsetByTime", "-g", "gp", "-t", TOPIC, "-s", "x")
    assert "TOPIC_NOT_EXIST" in cluster.fails("consumerProgress", "-g", "nobody")


def _fields(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        name, _, value = line.partition(":")
        out[name.strip()] = value.strip()
    return out


def test_admin_query_msg_by_id(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. queryMsgById -i <offset msgId of the 2nd message>. 2. -i <its unique key> -t AdminT.
    3. -i with an unknown unique key. 4. -i with a unique key but no -t.
    Expected: both print upstream's fields (topic, tags, keys, queue 1 offset 0, the offset id,
    store host = the broker) and write the body file; the unknown key and the missing topic each
    fail on one line."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    by_offset = _fields(cluster.ok("queryMsgById", "-i", cluster.offset_ids[1]))
    by_uniq = _fields(cluster.ok("queryMsgById", "-i", cluster.uniq_keys[1], "-t", TOPIC))
    for fields in (by_offset, by_uniq):
        assert fields["OffsetID"] == cluster.offset_ids[1]
        assert fields["Topic"] == TOPIC
        assert fields["Tags"] == "[TagA]"
        assert fields["Keys"] == "[k1 shared]"
        assert (fields["Queue ID"], fields["Queue Offset"]) == ("1", "0")
        assert fields["Store Host"] == cluster.broker
        assert f"UNIQ_KEY={cluster.uniq_keys[1]}" in fields["Properties"]
        assert Path(fields["Message Body Path"]).read_bytes() == b"body-1"
    assert "no message" in cluster.fails("queryMsgById", "-i", "NOPE", "-t", TOPIC)
    assert "give -t" in cluster.fails("queryMsgById", "-i", cluster.uniq_keys[1])


def test_admin_query_msg_by_key_and_offset(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. queryMsgByKey -k shared. 2. -k k3. 3. -k absent. 4. queryMsgByOffset -b broker-a -i 0
    -o 2 -f UTF-8. 5. the same at offset 9.
    Expected: "shared" lists all 5 messages (unique keys, queues, offsets), k3 exactly the 4th;
    an unknown key fails on one line; the offset lookup prints the 5th message with its body;
    offset 9 fails on one line."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    rows = _rows(cluster.ok("queryMsgByKey", "-t", TOPIC, "-k", "shared"))
    assert sorted(rows) == sorted(
        [[key, str(qid), str(QUEUES[:i].count(qid))]
         for i, (key, qid) in enumerate(zip(cluster.uniq_keys, QUEUES, strict=True))]
    )  # fmt: skip
    assert _rows(cluster.ok("queryMsgByKey", "-t", TOPIC, "-k", "k3")) == [
        [cluster.uniq_keys[3], "1", "1"]
    ]
    assert "no message" in cluster.fails("queryMsgByKey", "-t", TOPIC, "-k", "absent")
    fields = _fields(cluster.ok("queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", "0",
                                "-o", "2", "-f", "UTF-8"))  # fmt: skip
    assert fields["OffsetID"] == cluster.offset_ids[4]
    assert fields["Message Body"] == "body-4"
    assert "no message" in cluster.fails("queryMsgByOffset", "-t", TOPIC, "-b", "broker-a",
                                         "-i", "0", "-o", "9")  # fmt: skip


def test_admin_broker_config_get_and_update(cluster: Cluster) -> None:
    """1. getBrokerConfig -b. 2. updateBrokerConfig -c -k defaultQueryMaxNum -v 40, then get.
    3. updateBrokerConfig with brokerName, an unknown key, a black-listed key, a bad value.
    Expected: the banner and ``key=  value`` lines (brokerName broker-a); the update prints
    upstream's success line and getBrokerConfig -c shows 40; each refused update exits 1 with
    one line naming why, and the value is unchanged."""
    lines = cluster.ok("getBrokerConfig", "-b", cluster.broker)
    assert lines[0] == f"============{cluster.broker}============"
    values = {k.strip(): v.strip() for k, _, v in (ln.partition("=  ") for ln in lines[1:] if ln)}
    assert values["brokerName"] == "broker-a"
    assert values["defaultQueryMaxNum"] == "32"
    out = cluster.ok("updateBrokerConfig", "-c", CLUSTER, "-k", "defaultQueryMaxNum", "-v", "40")
    assert out == [f"update broker config success, {cluster.broker}"]
    after = cluster.ok("getBrokerConfig", "-c", CLUSTER)
    assert after[0] == f"============Master: {cluster.broker}============"
    assert any(ln.split() == ["defaultQueryMaxNum", "=", "40"] for ln in after)
    b = cluster.broker
    assert "read only at broker start-up" in cluster.fails(
        "updateBrokerConfig", "-b", b, "-k", "brokerName", "-v", "x"
    )
    assert "not a broker key" in cluster.fails(
        "updateBrokerConfig", "-b", b, "-k", "nope", "-v", "1"
    )
    assert "black list" in cluster.fails(
        "updateBrokerConfig", "-b", b, "-k", "storePathRootDir", "-v", "elsewhere"
    )
    assert "defaultQueryMaxNum" in cluster.fails(
        "updateBrokerConfig", "-b", b, "-k", "defaultQueryMaxNum", "-v", "many"
    )
    final = cluster.ok("getBrokerConfig", "-b", b)
    assert any(ln.split() == ["brokerName", "=", "broker-a"] for ln in final)


async def _send_and_pull(addr: str, topic: str, sends: int, pulls_group: str) -> None:
    client = JavaLikeClient()
    try:
        for i in range(sends):
            resp = await client.send(addr, topic, f"s-{i}".encode(), queue_id=0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        beat = await client.heartbeat(addr, pulls_group, (subscription(topic),))
        assert beat.code == ResponseCode.SUCCESS, beat.remark
        got = await client.pull(
            addr, pulls_group, topic, 0, commit_offset=0, suspend_ms=5000, timeout_s=10
        )
        assert got.code == ResponseCode.SUCCESS, got.remark
    finally:
        await client.close()


def test_admin_stats_all(cluster: Cluster) -> None:
    """1. updateTopic StatsT (one queue). 2. Send 4 messages to queue 0 and pull them all as group
    StatsG (committing offset 0). 3. statsAll -t StatsT until the counts show (stats are sampled
    every second). 4. statsAll -a -t NoSuchTopic.
    Expected: upstream's header; one StatsT/StatsG row with accumulation 4 (offset 0 committed,
    max 4), InTPS and OutTPS > 0, InMsg24Hour 4 and OutMsg24Hour 4; only the header for the
    unknown topic."""
    cluster.ok("updateTopic", "-t", "StatsT", "-c", CLUSTER, "-r", "1", "-w", "1")
    asyncio.run(_send_and_pull(cluster.broker, "StatsT", 4, "StatsG"))
    deadline = time.monotonic() + 15
    while True:
        lines = cluster.ok("statsAll", "-t", "StatsT")
        rows = _rows(lines)
        if (rows and rows[0][-2:] == ["4", "4"]) or time.monotonic() > deadline:
            break
    assert lines[0].split() == [
        "#Topic", "#Consumer", "Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
        "#OutMsg24Hour",
    ]  # fmt: skip
    (row,) = rows
    assert row[:3] == ["StatsT", "StatsG", "4"]
    assert float(row[3]) > 0, lines
    assert float(row[4]) > 0, lines
    assert row[5:] == ["4", "4"]
    assert cluster.ok("statsAll", "-a", "-t", "NoSuchTopic") == lines[:1]
