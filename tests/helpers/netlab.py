"""Hosts in Linux network namespaces whose links can fail (issue 25, item 5: partitions).

:class:`NetLab` makes one network namespace per named host, each with a veth pair onto one
bridge in the test's own namespace; the test process itself is the host :data:`CLIENT` (the
bridge's address). Daemons run in a host with ``ip netns exec`` (:meth:`NetLab.wrap`), bind
that host's address and may use fixed ports: every host has its own port space.

Links fail, processes do not: :meth:`NetLab.block` drops, on the sender's device, every packet
one host sends to another (an HTB class whose bfifo holds one byte, selected by a u32 filter on
the destination address), so established TCP connections stall and new ones time out exactly as
across a cut cable. :meth:`NetLab.throttle` makes a link slow instead: the packets go through an
HTB class of :data:`THROTTLE_RATE` with a short queue, so a busy link lags further and further
behind, drops what overflows and TCP backs off (a follower that cannot keep up). ``tc``'s drop
and police actions and netem (latency, loss) need kernel modules many containers lack (this
one's kernel has no netem); HTB, bfifo, pfifo and u32 are built in almost everywhere.

Needs root and ``ip``/``tc``: :func:`unavailable` says why not, for ``pytest.skip``. Everything
made is named after the test's PID, removed by :meth:`NetLab.close`, and leftovers of dead test
processes are removed by the next :meth:`NetLab.create`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

import pytest

from rocketpy.tools.cluster import pid_alive

CLIENT = "client"
_DEV = "eth0"  # every namespace's end of its veth pair
_TIMEOUT_S = 10.0
_OWN = re.compile(r"^rpy(\d+)-")
#: What a throttled link carries (HTB rate): a few hundred 128 B messages a second.
THROTTLE_RATE = "256kbit"
#: Packets a throttled link queues before it drops (seconds of delay at THROTTLE_RATE).
_THROTTLE_QUEUE = 32


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) is not installed"
    probe = f"rpy{os.getpid()}-probe"
    try:
        _run(["ip", "netns", "add", probe])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return f"cannot create a network namespace: {e}"
    try:
        _run(["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "handle",
              "1:", "htb", "default", "1"])  # fmt: skip
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return f"tc cannot install an HTB qdisc: {e}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def lab_fixture(hosts: Iterable[str]) -> Callable[[], Iterator[NetLab]]:
    """A pytest fixture yielding a created :class:`NetLab` of ``hosts`` (closed afterwards),
    or skipping the test with :func:`unavailable`'s reason."""
    names = list(hosts)

    @pytest.fixture
    def lab() -> Iterator[NetLab]:
        why = unavailable()
        if why is not None:
            pytest.skip(why)
        net = NetLab(names)
        net.create()
        try:
            yield net
        finally:
            net.close()

    return lab


def remove_leftovers() -> None:
    """Delete namespaces and bridges that test processes no longer running left behind."""
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    ).stdout
    dead: set[int] = set()
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        match = _OWN.match(name)
        if match and not pid_alive(int(match.group(1))):
            dead.add(int(match.group(1)))
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    for pid in dead:
        subprocess.run(["ip", "link", "del", f"rpb{pid}"], capture_output=True, check=False)


def _free_subnet(pid: int) -> int:
    """A third octet for 10.231.<n>.0/24 that no other address here uses, starting from one
    derived from ``pid`` (two test runs at once must not share a subnet)."""
    shown = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False,
        timeout=_TIMEOUT_S,
    ).stdout  # fmt: skip
    used = {int(m) for m in re.findall(r"inet 10\.231\.(\d+)\.", shown)}
    for step in range(250):
        n = (pid + step) % 250 + 1
        if n not in used:
            return n
    raise RuntimeError("no free 10.231.x.0/24 subnet")


class NetLab:
    """A bridge, one namespace per host, and the links cut between them."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.pid = os.getpid()
        self.hosts = [h for h in hosts if h != CLIENT]
        self.bridge = f"rpb{self.pid}"
        # 10.231.<n>.0/24: one subnet per test process, the bridge (the client) at .1
        self._prefix = f"10.231.{_free_subnet(self.pid)}"
        self.ip = {CLIENT: f"{self._prefix}.1"}
        self.ip.update({h: f"{self._prefix}.{i + 10}" for i, h in enumerate(self.hosts)})
        self._blocked: dict[str, set[str]] = defaultdict(set)
        self._throttled: dict[str, set[str]] = defaultdict(set)
        self._made: list[str] = []

    def netns(self, host: str) -> str:
        """The namespace name of ``host``."""
        return f"rpy{self.pid}-{host}"

    def create(self) -> None:
        """Make the bridge and every host; on failure undo what was made."""
        remove_leftovers()
        try:
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            self._made.append("bridge")
            _run(["ip", "addr", "add", f"{self.ip[CLIENT]}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
            self._shaper(CLIENT)
            for i, host in enumerate(self.hosts):
                ns, veth = self.netns(host), f"rpv{self.pid}x{i}"
                _run(["ip", "netns", "add", ns])
                self._made.append(ns)
                _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", _DEV, "netns", ns])
                _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
                self._in(host, ["ip", "addr", "add", f"{self.ip[host]}/24", "dev", _DEV])
                self._in(host, ["ip", "link", "set", _DEV, "up"])
                self._in(host, ["ip", "link", "set", "lo", "up"])
                self._shaper(host)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove every namespace and the bridge (veth pairs go with their namespaces)."""
        for name in reversed(self._made):
            argv = (
                ["ip", "link", "del", self.bridge]
                if name == "bridge"
                else ["ip", "netns", "del", name]
            )
            subprocess.run(argv, capture_output=True, check=False, timeout=_TIMEOUT_S)
        self._made.clear()

    def wrap(self, host: str) -> list[str]:
        """The argv prefix that runs a command in ``host`` (nothing for the client)."""
        return [] if host == CLIENT else ["ip", "netns", "exec", self.netns(host)]

    def _in(self, host: str, argv: list[str]) -> None:
        _run([*self.wrap(host), *argv])

    def _device(self, host: str) -> str:
        return self.bridge if host == CLIENT else _DEV

    def _shaper(self, host: str) -> None:
        """HTB on the host's device: class 1:1 passes everything, class 1:2 (a one-byte bfifo)
        drops every packet a filter sends it, class 1:3 passes THROTTLE_RATE."""
        dev = self._device(host)
        tc = ["tc"]
        self._in(host, [*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                        "default", "1"])  # fmt: skip
        self._in(host, [*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
                        "htb", "rate", "100gbit", "quantum", "60000"])  # fmt: skip
        self._in(host, [*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:2",
                        "htb", "rate", "8bit", "quantum", "1514"])  # fmt: skip
        self._in(host, [*tc, "qdisc", "add", "dev", dev, "parent", "1:2", "handle", "20:",
                        "bfifo", "limit", "1"])  # fmt: skip
        self._in(host, [*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:3",
                        "htb", "rate", THROTTLE_RATE, "ceil", THROTTLE_RATE,
                        "quantum", "1514"])  # fmt: skip
        self._in(host, [*tc, "qdisc", "add", "dev", dev, "parent", "1:3", "handle", "30:",
                        "pfifo", "limit", str(_THROTTLE_QUEUE)])  # fmt: skip

    def _apply(self, host: str) -> None:
        dev = self._device(host)
        subprocess.run(
            [*self.wrap(host), "tc", "filter", "del", "dev", dev, "parent", "1:"],
            capture_output=True,
            check=False,
            timeout=_TIMEOUT_S,
        )
        blocked = self._blocked[host]
        flows = [(dst, "1:2") for dst in sorted(blocked)]
        flows += [(dst, "1:3") for dst in sorted(self._throttled[host] - blocked)]
        for dst, flow in flows:
            self._in(host, ["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip",
                            "prio", "1", "u32", "match", "ip", "dst", f"{self.ip[dst]}/32",
                            "flowid", flow])  # fmt: skip

    def block(self, src: str, dst: str) -> None:
        """Drop every packet ``src`` sends to ``dst`` (one way)."""
        self._blocked[src].add(dst)
        self._apply(src)

    def throttle(self, src: str, dst: str) -> None:
        """Carry what ``src`` sends to ``dst`` at THROTTLE_RATE (one way; a cut overrides)."""
        self._throttled[src].add(dst)
        self._apply(src)

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between ``a`` and ``b`` (both ways)."""
        self.block(a, b)
        self.block(b, a)

    def partition(self, side: Iterable[str], other: Iterable[str]) -> None:
        """Cut every link between a host of ``side`` and a host of ``other``."""
        others = list(other)
        for a in side:
            for b in others:
                self.cut(a, b)

    def isolate(self, host: str, keep: Iterable[str] = ()) -> None:
        """Cut ``host`` from every other host except those in ``keep``."""
        kept = set(keep)
        self.partition([host], [h for h in [CLIENT, *self.hosts] if h != host and h not in kept])

    def heal(self) -> None:
        """Restore every link, cut or throttled."""
        changed = {h for table in (self._blocked, self._throttled) for h, d in table.items() if d}
        self._blocked.clear()
        self._throttled.clear()
        for host in sorted(changed):
            self._apply(host)

    def blocked(self) -> dict[str, set[str]]:
        """The links cut now: host -> the hosts its packets to are dropped."""
        return {h: set(d) for h, d in self._blocked.items() if d}
