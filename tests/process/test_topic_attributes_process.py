"""Topic ``message.type`` attributes, the send-path type check, GET_TOPIC_CONFIG (351),
GET_SUBSCRIPTIONGROUP_CONFIG (352) and ``updateSubGroup -o`` against a real mqnamesrv + mqbroker,
driven by ``bin/mqadmin`` subprocesses and the admin client.

The broker runs with ``enableTopicMessageTypeCheck=true`` and ``autoCreateSubscriptionGroup=false``
(so 352 can answer SUBSCRIPTION_GROUP_NOT_EXIST); one broker per module, restarted in place by
the restart test (its address changes, the store stays).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketpy.broker.config_files import subscription_group_path, topics_path
from rocketpy.client.admin import AdminClient
from rocketpy.common import fastjson
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, run_bin, start_broker, start_namesrv

pytestmark = pytest.mark.process

CLUSTER = "DefaultCluster"
BROKER_EXTRA = "enableTopicMessageTypeCheck=true\nautoCreateSubscriptionGroup=false\n"
TYPE_REFUSED = "TopicMessageType validate failed, the expected type is {}, but actual type is {}"


@dataclass
class Cluster:
    """The module's processes; ``broker`` changes when the broker is restarted."""

    tmp: Path
    namesrv: str
    broker: str
    daemons: dict[str, Daemon] = field(default_factory=dict)

    @property
    def store(self) -> Path:
        """The broker's ``storePathRootDir`` (start_broker's default)."""
        return self.tmp / "broker-a" / "store"

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``mqadmin <args> -n <namesrv>``."""
        return run_bin(["mqadmin", *args, "-n", self.namesrv], self.tmp)

    def ok(self, *args: str) -> list[str]:
        """Run mqadmin, assert exit 0, return the stdout lines."""
        out = self.admin(*args)
        assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
        return out.stdout.splitlines()

    def fails(self, *args: str) -> str:
        """Run mqadmin, assert exit 1 and a single stderr line; return it."""
        out = self.admin(*args)
        assert out.returncode == 1, f"{args}: {out.stdout}\n{out.stderr}"
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        return lines[0]

    def restart_broker(self) -> None:
        """SIGTERM the broker and start it again on the same store."""
        self.daemons.pop("broker").stop()
        daemon, self.broker = start_broker(self.tmp, self.namesrv, extra=BROKER_EXTRA)
        self.daemons["broker"] = daemon


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("attrs")
    made: Cluster | None = None
    namesrv, ns_addr = start_namesrv(tmp)
    try:
        broker, addr = start_broker(tmp, ns_addr, extra=BROKER_EXTRA)
        made = Cluster(tmp, ns_addr, addr, {"broker": broker})
        yield made
    finally:
        if made is not None:
            for daemon in made.daemons.values():
                daemon.stop()
        namesrv.stop()


async def _attributes(cluster: Cluster, topic: str) -> dict[str, str]:
    admin = AdminClient(cluster.namesrv)
    try:
        async with asyncio.timeout(10):
            return dict((await admin.topic_config(cluster.broker, topic)).attributes)
    finally:
        await admin.close()


def _on_disk(cluster: Cluster, topic: str) -> object:
    table = fastjson.loads(topics_path(cluster.store).read_text(encoding="utf-8"))
    return table["topicConfigTable"][topic]["attributes"]


async def test_update_topic_attributes_round_trip_through_restart(cluster: Cluster) -> None:
    """1. updateTopic -a +message.type=FIFO on FifoT. 2. GET_TOPIC_CONFIG and topics.json.
    3. -a +reserve.time=7 then -a -reserve.time. 4. Restart the broker; GET_TOPIC_CONFIG.
    Expected: the command prints attributes={+message.type=FIFO}; 351 and the file hold
    {message.type: FIFO} (after step 3 again only that); after the restart 351 still does."""
    out = cluster.ok("updateTopic", "-t", "FifoT", "-c", CLUSTER, "-a", "+message.type=FIFO")
    assert out[-1] == (
        "TopicConfig [topicName=FifoT, readQueueNums=8, writeQueueNums=8, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, "
        "attributes={+message.type=FIFO}]"
    )
    assert await _attributes(cluster, "FifoT") == {"message.type": "FIFO"}
    cluster.ok("updateTopic", "-t", "FifoT", "-c", CLUSTER, "-a", "+reserve.time=7")
    assert await _attributes(cluster, "FifoT") == {"message.type": "FIFO", "reserve.time": "7"}
    cluster.ok("updateTopic", "-t", "FifoT", "-c", CLUSTER, "-a", "-reserve.time")
    assert await _attributes(cluster, "FifoT") == {"message.type": "FIFO"}
    cluster.restart_broker()
    assert _on_disk(cluster, "FifoT") == {"message.type": "FIFO"}
    assert await _attributes(cluster, "FifoT") == {"message.type": "FIFO"}


def test_update_topic_attribute_refusals(cluster: Cluster) -> None:
    """updateTopic -a with a bad value, an unknown key, a malformed item, deleting a missing
    key, and MIXED (enableMixedMessageType off): each exits 1 with one clear line naming the
    problem, and the topic keeps its attributes."""
    cluster.ok("updateTopic", "-t", "RefT", "-c", CLUSTER, "-a", "+message.type=DELAY")
    line = cluster.fails("updateTopic", "-t", "RefT", "-c", CLUSTER, "-a", "+message.type=fifo")
    assert "SYSTEM_ERROR" in line
    assert "value is not in set: [DELAY, FIFO, MIXED, NORMAL, TRANSACTION" in line
    line = cluster.fails("updateTopic", "-t", "RefT", "-c", CLUSTER, "-a", "+color=red")
    assert "unsupported key: color" in line
    line = cluster.fails("updateTopic", "-t", "RefT", "-c", CLUSTER, "-a", "message.type=FIFO")
    assert "add/alter attribute format is wrong: message.type" in line
    line = cluster.fails("updateTopic", "-t", "RefT", "-c", CLUSTER, "-a", "-reserve.time")
    assert "attempt to delete a nonexistent key: reserve.time" in line
    line = cluster.fails("updateTopic", "-t", "RefT", "-c", CLUSTER, "-a", "+message.type=MIXED")
    assert "MIXED message type is not supported." in line
    assert _on_disk(cluster, "RefT") == {"message.type": "DELAY"}


async def test_send_type_check_refuses_and_accepts(cluster: Cluster) -> None:
    """1. updateTopic TypedF with +message.type=FIFO and PlainT without attributes.
    2. Send a FIFO message (__SHARDINGKEY) and a NORMAL one to each; a NORMAL one to a topic the
    broker does not have.
    Expected: TypedF takes the FIFO message and refuses the NORMAL one with MESSAGE_ILLEGAL and
    upstream's remark; PlainT the opposite; the unknown topic is refused as UNSPECIFIED and
    not created (351 answers TOPIC_NOT_EXIST)."""
    cluster.ok("updateTopic", "-t", "TypedF", "-c", CLUSTER, "-a", "+message.type=FIFO")
    cluster.ok("updateTopic", "-t", "PlainT", "-c", CLUSTER)
    fifo = {"__SHARDINGKEY": "order-1"}
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(20):
            resp = await client.send(cluster.broker, "TypedF", b"f", props=fifo)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            resp = await client.send(cluster.broker, "TypedF", b"n")
            assert (resp.code, resp.remark) == (
                ResponseCode.MESSAGE_ILLEGAL,
                TYPE_REFUSED.format("FIFO", "NORMAL"),
            )
            resp = await client.send(cluster.broker, "PlainT", b"n")
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            resp = await client.send(cluster.broker, "PlainT", b"f", props=fifo)
            assert (resp.code, resp.remark) == (
                ResponseCode.MESSAGE_ILLEGAL,
                TYPE_REFUSED.format("NORMAL", "FIFO"),
            )
            resp = await client.send(cluster.broker, "NoSuchTopic", b"n")
            assert (resp.code, resp.remark) == (
                ResponseCode.MESSAGE_ILLEGAL,
                TYPE_REFUSED.format("UNSPECIFIED", "NORMAL"),
            )
    finally:
        await client.close()
    with pytest.raises(RemoteError) as info:
        await _attributes(cluster, "NoSuchTopic")
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert "No topic in this broker. topic: NoSuchTopic" in str(info.value)


async def test_update_sub_group_orderly_visible_via_352(cluster: Cluster) -> None:
    """1. updateSubGroup -g gOrderly -c DefaultCluster -o true. 2. GET_SUBSCRIPTIONGROUP_CONFIG.
    3. subscriptionGroup.json. 4. 352 for a group nobody created (auto-creation off).
    Expected: the command prints consumeMessageOrderly=true; 352 and the file say true;
    step 4 raises SUBSCRIPTION_GROUP_NOT_EXIST 'No group in this broker'."""
    out = cluster.ok("updateSubGroup", "-g", "gOrderly", "-c", CLUSTER, "-o", "true")
    assert "consumeMessageOrderly=true" in out[-1]
    admin = AdminClient(cluster.namesrv)
    try:
        async with asyncio.timeout(10):
            cfg = await admin.subscription_group_config(cluster.broker, "gOrderly")
            assert (cfg.group_name, cfg.consume_message_orderly) == ("gOrderly", True)
            with pytest.raises(RemoteError) as info:
                await admin.subscription_group_config(cluster.broker, "gNobody")
    finally:
        await admin.close()
    assert info.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "No group in this broker" in str(info.value)

    def persisted() -> object:
        text = subscription_group_path(cluster.store).read_text(encoding="utf-8")
        return fastjson.loads(text)["subscriptionGroupTable"]["gOrderly"]["consumeMessageOrderly"]

    # the broker persists the group table off the request path: wait for the write
    async with asyncio.timeout(10):
        while not subscription_group_path(cluster.store).exists() or "gOrderly" not in (
            subscription_group_path(cluster.store).read_text(encoding="utf-8")
        ):
            await asyncio.sleep(0.05)
    assert persisted() is True
