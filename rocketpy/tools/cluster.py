"""``make cluster``: a local cluster on loopback with its data in a throwaway directory.

Owns: writing each daemon's config under ``<dir>/conf``, starting the daemons as detached processes
with their output under ``<dir>/logs``, waiting for each boot line (and, once all are up, for the
NameServer to list a master in every broker-set), recording pids and addresses in
``<dir>/cluster.json``, stopping them in reverse order (``stop``), and SIGKILLing the current
master broker to watch a failover (``kill-master``). Starts the NameServer, a three-node
controller group and one broker-set of three brokers in controller mode (AutoSwitch HA). With
``--embedded`` (``make cluster EMBEDDED=1``) three NameServers with
``enableControllerInNamesrv=true`` form the controller group instead of standalone mqcontroller
processes (upstream's ``cluster-3n-namesrv-plugin`` layout). ``--proxy local`` (``make cluster
PROXY=local``, the Makefile's default) starts every broker with ``--enable-proxy`` and its own
``rmq-proxy.json`` (gRPC on 8081, 8091, 8101 beside the default ports); ``--proxy cluster`` starts
one ``mqproxy`` (gRPC 8081) after the brokers; either way the summary prints the gRPC endpoints
the 5.x clients take. Must not: import daemon packages (it drives them as processes, like an
operator would).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rocketpy.client.admin import AdminClient
from rocketpy.common.errors import RocketPyError
from rocketpy.tools.children import free_ports

BOOT_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class Member:
    """One started daemon."""

    name: str
    role: str
    pid: int
    address: str
    log: str


@dataclass(frozen=True, slots=True)
class Spec:
    """One daemon to start: ``python -m <module> -c <conf>``, booted when ``boot`` matches."""

    name: str
    role: str
    module: str
    conf: dict[str, str]
    boot: re.Pattern[str]
    # An embedded controller prints a second boot line; it is recorded as a "controller"
    # member with the same pid.
    controller_boot: re.Pattern[str] | None = None
    # Extra command-line arguments ({namesrv} is filled in like conf values).
    args: tuple[str, ...] = ()
    # An rmq-proxy.json for the daemon (passed as -pc): mqproxy, or a broker with
    # --enable-proxy, whose second boot line names a "proxy" member with the same pid.
    proxy_json: dict[str, str | int] | None = None
    proxy_boot: re.Pattern[str] | None = None


NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address (\S+)")
BROKER_BOOT = re.compile(r"The broker\[\S+, (\S+)\] boot success\.")
CONTROLLER_BOOT = re.compile(
    r"The Controller Server boot success\. serializeType=\w+, address (\S+)"
)
EMBEDDED_CONTROLLER_BOOT = re.compile(
    r"The ControllerManager boot success\. serializeType=\w+, address (\S+)"
)
PROXY_BOOT = re.compile(r"rocketmq-proxy startup successfully, grpc address (\S+),")
CONTROLLERS = 3
BROKER_PORT_OFFSET = 1035  # 9876 -> 10911, upstream's default broker port
GRPC_PORT_OFFSET = -1795  # 9876 -> 8081, upstream's default gRPC port
PROXY_MODES = ("local", "cluster")


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _grpc_port(base_port: int, i: int) -> int:
    return base_port + GRPC_PORT_OFFSET + 10 * i if base_port else 0


def _with_proxy(specs: list[Spec], base_port: int, proxy: str | None) -> list[Spec]:
    """Local: every broker also serves gRPC; cluster: one mqproxy after the brokers."""
    if proxy is None or not _has_module("rocketpy.cli.proxy"):
        return specs
    conf: dict[str, str | int] = {"bindAddress": "127.0.0.1", "grpcShutdownTimeSeconds": 3}
    if proxy == "local":
        brokers = [s for s in specs if s.role == "broker"]
        return [
            replace(
                s, args=("--enable-proxy",), proxy_boot=PROXY_BOOT,
                proxy_json={**conf, "grpcServerPort": _grpc_port(base_port, brokers.index(s))},
            )
            if s.role == "broker" else s
            for s in specs
        ]  # fmt: skip
    mqproxy = Spec(
        "proxy", "proxy", "rocketpy.cli.proxy", {}, PROXY_BOOT, args=("-n", "{namesrv}"),
        proxy_json={**conf, "grpcServerPort": _grpc_port(base_port, 0)},
    )  # fmt: skip
    return [*specs, mqproxy]


def _specs(
    base_port: int, data: Path, *, embedded: bool = False, proxy: str | None = None
) -> list[Spec]:
    return _with_proxy(_daemon_specs(base_port, data, embedded=embedded), base_port, proxy)


def _daemon_specs(base_port: int, data: Path, *, embedded: bool = False) -> list[Spec]:
    if embedded:
        specs = _embedded_specs(base_port, data)
        if _has_module("rocketpy.cli.broker"):
            specs += _broker_specs(base_port, data)
        return specs
    specs = [
        Spec(
            "namesrv",
            "namesrv",
            "rocketpy.cli.namesrv",
            {
                "listenPort": str(base_port),
                "bindAddress": "127.0.0.1",
                "kvConfigPath": str(data / "namesrv" / "kvConfig.json"),
                "configStorePath": str(data / "namesrv" / "namesrv.properties"),
            },
            NAMESRV_BOOT,
        )
    ]
    if _has_module("rocketpy.cli.controller"):
        specs += _controller_specs(base_port, data)
    if _has_module("rocketpy.cli.broker"):
        specs += _broker_specs(base_port, data)
    return specs


BROKERS = 3


def _broker_specs(base_port: int, data: Path) -> list[Spec]:
    """One broker-set (broker-a) of three replicas in controller mode: the controllers assign
    their ids and elect the master; they replicate with AutoSwitch HA on listenPort + 1 and a
    SEND_OK waits for every member of the SyncStateSet (upstream's quick-start layout)."""
    specs = []
    for i in range(BROKERS):
        port = base_port + BROKER_PORT_OFFSET + 10 * i if base_port else 0
        specs.append(
            Spec(
                f"broker-a-n{i}",
                "broker",
                "rocketpy.cli.broker",
                {
                    "brokerClusterName": "DefaultCluster",
                    "brokerName": "broker-a",
                    "brokerId": "-1",
                    "brokerRole": "SLAVE",
                    "brokerIP1": "127.0.0.1",
                    "bindAddress": "127.0.0.1",
                    "listenPort": str(port),
                    "haListenPort": str(port + 1 if port else 0),
                    "namesrvAddr": "{namesrv}",
                    "enableControllerMode": "true",
                    "controllerAddr": "{controllers}",
                    "allAckInSyncStateSet": "true",
                    "storePathRootDir": str(data / f"broker-a-n{i}" / "store"),
                    "autoCreateTopicEnable": "true",
                    "flushDiskType": "ASYNC_FLUSH",
                },
                BROKER_BOOT,
            )
        )
    return specs


def _controller_specs(base_port: int, data: Path) -> list[Spec]:
    """A three-node Raft group on 127.0.0.1: 9877-9879 beside a 9876 NameServer, as upstream's
    quick start (free ports when ``base_port`` is 0: the peer list needs every port up front)."""
    ports = (
        [base_port + 1 + i for i in range(CONTROLLERS)] if base_port else free_ports(CONTROLLERS)
    )
    peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
    return [
        Spec(
            f"controller-n{i}",
            "controller",
            "rocketpy.cli.controller",
            {
                "controllerDLegerGroup": "group1",
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": str(data / f"controller-n{i}" / "raft"),
                "configStorePath": str(data / f"controller-n{i}" / "controller.properties"),
            },
            CONTROLLER_BOOT,
        )
        for i in range(CONTROLLERS)
    ]


def _embedded_specs(base_port: int, data: Path) -> list[Spec]:
    """Three NameServers, each with an embedded controller: n0 on 9876 (controller 9877), n1 on
    9886 (9887), n2 on 9896 (9897); free ports when ``base_port`` is 0."""
    if base_port:
        ns_ports = [base_port + 10 * i for i in range(CONTROLLERS)]
        peer_ports = [p + 1 for p in ns_ports]
    else:
        ns_ports, peer_ports = [0] * CONTROLLERS, free_ports(CONTROLLERS)
    peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(peer_ports))
    return [
        Spec(
            f"namesrv-n{i}",
            "namesrv",
            "rocketpy.cli.namesrv",
            {
                "listenPort": str(ns_ports[i]),
                "bindAddress": "127.0.0.1",
                "kvConfigPath": str(data / f"namesrv-n{i}" / "kvConfig.json"),
                "configStorePath": str(data / f"namesrv-n{i}" / "namesrv.properties"),
                "enableControllerInNamesrv": "true",
                "controllerDLegerGroup": "group1",
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": str(data / f"namesrv-n{i}" / "raft"),
            },
            NAMESRV_BOOT,
            EMBEDDED_CONTROLLER_BOOT,
        )
        for i in range(CONTROLLERS)
    ]


def _resolve(conf: dict[str, str], members: list[Member]) -> dict[str, str]:
    """Fill ``{namesrv}``/``{controllers}`` with the addresses of the daemons already started."""
    return {k: _fill(v, members) for k, v in conf.items()}


def _fill(value: str, members: list[Member]) -> str:
    namesrv = ";".join(m.address for m in members if m.role == "namesrv")
    controllers = ";".join(m.address for m in members if m.role == "controller")
    return value.replace("{namesrv}", namesrv).replace("{controllers}", controllers)


def _argv(directory: Path, spec: Spec, members: list[Member]) -> list[str]:
    """``python -m <module> [-c <conf>] [args] [-pc <json>]``, writing the config files."""
    argv = [sys.executable, "-m", spec.module]
    if spec.conf:
        conf = directory / "conf" / f"{spec.name}.conf"
        conf.write_text(_render(_resolve(spec.conf, members)), encoding="utf-8")
        argv += ["-c", str(conf)]
    argv += [_fill(a, members) for a in spec.args]
    if spec.proxy_json is not None:
        path = directory / "conf" / f"{spec.name}-rmq-proxy.json"
        path.write_text(json.dumps(spec.proxy_json, indent=2), encoding="utf-8")
        argv += ["-pc", str(path)]
    return argv


def _render(conf: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in conf.items())


def _wait_boot(proc: subprocess.Popen[bytes], log: Path, pattern: re.Pattern[str]) -> str:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        match = pattern.search(text)
        if match:
            return match.group(1)  # the boot line is printed whole, in one write
        if proc.poll() is not None:
            raise RuntimeError(
                f"exited with {proc.returncode} before booting; see {log.with_suffix('.err')}"
            )
        time.sleep(0.05)
    raise RuntimeError(f"no boot line within {BOOT_TIMEOUT_S:.0f} s; see {log}")


def _state_file(directory: Path) -> Path:
    return directory / "cluster.json"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _load(directory: Path) -> list[Member]:
    path = _state_file(directory)
    if not path.exists():
        return []
    return [Member(**m) for m in json.loads(path.read_text(encoding="utf-8"))["members"]]


def start(
    directory: Path, base_port: int, *, embedded: bool = False, proxy: str | None = None
) -> int:
    """Start a fresh cluster under ``directory``; print the summary. Returns the exit code."""
    specs = _specs(base_port, directory / "data", embedded=embedded, proxy=proxy)
    members = launch(directory, specs, "make cluster-stop")
    if members is None:
        return 1
    _print_summary(directory, members)
    return 0


def launch(directory: Path, specs: list[Spec], stop_hint: str) -> list[Member] | None:
    """Start ``specs`` in order under a fresh ``directory`` (``{namesrv}``/``{controllers}``
    in a conf value become the addresses of the daemons started before it).

    Returns:
        The started members, or None when a cluster already runs there or a daemon did not
        boot (what was started is stopped again).
    """
    running = [m for m in _load(directory) if pid_alive(m.pid)]
    if running:
        print(f"a cluster is already running from {directory}; run `{stop_hint}` first")
        return None
    if directory.exists():
        shutil.rmtree(directory)
    (directory / "conf").mkdir(parents=True)
    (directory / "logs").mkdir()
    members: list[Member] = []
    for spec in specs:
        argv = _argv(directory, spec, members)
        log = directory / "logs" / f"{spec.name}.out"
        env = dict(os.environ, ROCKETPY_LOG_DIR=str(directory / "logs" / spec.name))
        # stdout (the boot line) and stderr (the readable log) in separate files: a log line
        # written by the logging thread must never land inside the boot line.
        with log.open("wb") as out, log.with_suffix(".err").open("wb") as err:
            proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        started = [Member(spec.name, spec.role, proc.pid, "", str(log))]
        try:
            started[0] = replace(started[0], address=_wait_boot(proc, log, spec.boot))
            if spec.controller_boot is not None:
                address = _wait_boot(proc, log, spec.controller_boot)
                name = spec.name.replace("namesrv", "controller")
                started.append(Member(name, "controller", proc.pid, address, str(log)))
            if spec.proxy_boot is not None:
                address = _wait_boot(proc, log, spec.proxy_boot)
                started.append(Member(f"{spec.name}-proxy", "proxy", proc.pid, address, str(log)))
        except RuntimeError as e:
            print(f"{spec.name}: {e}")
            _save(directory, [*members, started[0]])
            stop(directory)
            return None
        members += started
        _save(directory, members)
    if not wait_for_masters(members):
        print("warning: the NameServer lists no master for some broker-set yet; see the logs")
    return members


def wait_for_masters(members: list[Member], timeout_s: float = 30.0) -> bool:
    """Block until the NameServer lists every started broker and an id-0 (master) address in
    each broker-set: in controller mode a master exists only once the controllers elected it
    and it registered, and until then a client finds no route. False at ``timeout_s``."""
    namesrv = ";".join(m.address for m in members if m.role == "namesrv")
    brokers = sum(m.role == "broker" for m in members)
    if not namesrv or not brokers:
        return True

    async def poll() -> bool:
        admin = AdminClient(namesrv, timeout_s=2.0)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                with contextlib.suppress(RocketPyError, OSError):
                    sets = (await admin.cluster_info()).brokers.values()
                    registered = sum(len(b.broker_addrs) for b in sets)
                    if registered >= brokers and all(0 in b.broker_addrs for b in sets):
                        return True
                await asyncio.sleep(0.2)
            return False
        finally:
            await admin.close()

    return asyncio.run(poll())


def _save(directory: Path, members: list[Member]) -> None:
    payload = {"members": [asdict(m) for m in members]}
    _state_file(directory).write_text(json.dumps(payload, indent=2), encoding="utf-8")


def _print_summary(directory: Path, members: list[Member]) -> None:
    namesrv = ";".join(m.address for m in members if m.role == "namesrv")
    print(f"rocketpy cluster running, data and logs under {directory}")
    width = max((len(m.name) for m in members), default=14)
    for m in members:
        print(f"  {m.name:<{width}} {m.role:<10} {m.address:<22} pid {m.pid:<8} log {m.log}")
    controllers = ";".join(m.address for m in members if m.role == "controller")
    print(f"NAMESRV_ADDR={namesrv}")
    print(f"  try:  bin/mqadmin clusterList -n {namesrv}")
    if controllers:
        first = controllers.split(";")[0]
        print(f"        bin/mqadmin getControllerMetaData -a {first}")
    if any(m.role == "broker" for m in members):
        print(
            "        .venv/bin/python -m rocketpy.tools.benchmark producer"
            f" -n {namesrv} --topic BenchmarkTest --duration 10"
        )
    proxies = [m.address.replace("0.0.0.0:", "127.0.0.1:") for m in members if m.role == "proxy"]
    if proxies:
        print(f"GRPC_ENDPOINTS={';'.join(proxies)}")
        print(
            "  5.x client: pip install rocketmq-python-client; "
            f'ClientConfiguration("{proxies[0]}", Credentials())'
        )
    print("  stop: make cluster-stop      failover: make cluster-kill-master")


def stop(directory: Path) -> int:
    """SIGTERM every member in reverse start order; SIGKILL what outlives the deadline."""
    members = _load(directory)
    if not members:
        print(f"no cluster recorded under {directory}")
        return 0
    for m in reversed(members):
        if not pid_alive(m.pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(m.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while pid_alive(m.pid) and time.monotonic() < deadline:
            _reap(m.pid)
            time.sleep(0.05)
        if pid_alive(m.pid):
            print(f"{m.name} (pid {m.pid}) did not stop in {STOP_TIMEOUT_S:.0f} s, killing it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(m.pid, signal.SIGKILL)
        print(f"stopped {m.name} (pid {m.pid})")
    _state_file(directory).unlink(missing_ok=True)
    return 0


def kill_master(directory: Path) -> int:
    """SIGKILL the broker the controllers name as broker-a's master (``getSyncStateSet``)."""
    members = _load(directory)
    controllers = [m.address for m in members if m.role == "controller" and pid_alive(m.pid)]
    if not controllers:
        print(f"no running controller recorded under {directory}")
        return 1
    deadline = time.monotonic() + BOOT_TIMEOUT_S  # a fresh cluster may still be electing
    while True:
        out = subprocess.run(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "rocketpy.cli.admin", "getSyncStateSet", "-a", controllers[0],
             "-b", "broker-a"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        match = re.search(r"#MasterAddr\s+(\S+)", out.stdout)
        if match or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    master = next((m for m in members if match and m.address == match.group(1)), None)
    if master is None or not pid_alive(master.pid):
        print(f"no live master found: {out.stdout.strip() or out.stderr.strip()}")
        return 1
    os.kill(master.pid, signal.SIGKILL)
    _reap(master.pid)
    print(f"killed master {master.name} at {master.address} (pid {master.pid}); watch with")
    print(f"  bin/mqadmin getSyncStateSet -a {controllers[0]} -b broker-a")
    return 0


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def main(argv: list[str] | None = None) -> int:
    """``python -m rocketpy.tools.cluster start|stop --dir DIR``."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.cluster", description=__doc__)
    parser.add_argument("action", choices=("start", "stop", "kill-master"))
    parser.add_argument("--dir", type=Path, default=Path(".cluster"))
    parser.add_argument("--base-port", type=int, default=int(os.environ.get("BASE_PORT", "9876")))
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="NameServers with enableControllerInNamesrv=true instead of mqcontroller processes",
    )
    parser.add_argument(
        "--proxy", choices=PROXY_MODES,
        help="gRPC proxy for the 5.x clients: in every broker (local) or one mqproxy (cluster)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    if args.action == "start":
        return start(directory, args.base_port, embedded=args.embedded, proxy=args.proxy)
    if args.action == "kill-master":
        return kill_master(directory)
    return stop(directory)


if __name__ == "__main__":
    sys.exit(main())
