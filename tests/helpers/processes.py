"""Run ``bin/`` commands as real processes: start, read until the boot line, stop with deadlines.

Every daemon test uses :class:`Daemon`: it starts ``bin/<cmd>`` with a config file, reads stdout
until a regex matches (learning the real port), and on stop sends SIGTERM, waits with a deadline,
then SIGKILLs. On failure the captured output is attached to the assertion message.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from rocketpy.tools.children import free_ports

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "bin"
# Log lines left out of failure messages: tiny test stores repeat them every few hundred sends.
_NOISE = ("Index file is full",)
NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=JSON, address (\S+)")
BROKER_BOOT = re.compile(
    r"The broker\[(\S+), (\S+)\] boot success\. serializeType=JSON(?: and name server is (\S+))?"
)
#: A broker serving: booted, or (controller mode) up and waiting for a controller to give it a
#: role -- what a restart of a broker-set without an electable master prints first.
BROKER_UP = re.compile(r"The broker\[(\S+), (\S+)\] (?:boot success|is up but has no role yet)")


def bin_env(log_dir: Path) -> dict[str, str]:
    """Environment for a bin/ command: this interpreter's venv first, logs under ``log_dir``."""
    env = dict(os.environ, ROCKETPY_LOG_DIR=str(log_dir))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class Daemon:
    """A started ``bin/`` daemon."""

    def __init__(self, argv: list[str], log_dir: Path, wrap: Sequence[str] = ()) -> None:
        """``wrap``: an argv prefix the command runs under (``ip netns exec <ns>``: it execs the
        command, so the PID is the daemon's)."""
        self.argv = argv
        self.lines: list[str] = []
        self._lock = threading.Lock()
        log_dir.mkdir(parents=True, exist_ok=True)
        # stderr (the readable log) goes to its own file: sharing the pipe with stdout lets a log
        # line land inside the boot line under load.
        self.stderr_path = log_dir / f"{Path(argv[0]).name}-{id(self)}.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [*wrap, *argv],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            env=bin_env(log_dir),
            text=True,
        )
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        """Everything printed so far: stdout, then the stderr log."""
        with self._lock:
            out = "\n".join(self.lines)
        err = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return f"{out}\n--- stderr ---\n{err}"

    def tail(self, chars: int) -> str:
        """The last ``chars`` of :meth:`output` without the lines tiny test stores repeat
        (index files fill every few hundred messages), for a failure message."""
        kept = [ln for ln in self.output().splitlines() if not any(n in ln for n in _NOISE)]
        return "\n".join(kept)[-chars:]

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float = 15.0) -> re.Match[str]:
        """Block until a printed line matches ``pattern``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                for line in self.lines:
                    match = pattern.search(line)
                    if match:
                        return match
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.01)
        raise AssertionError(f"{pattern.pattern!r} not printed by {self.argv}:\n{self.output()}")

    def wait_output(self, text: str, timeout_s: float = 10.0) -> None:
        """Block until ``text`` appears in :meth:`output`, stderr log included: a daemon logs
        through a queue, so a line may land a moment after the reply (or close) it explains."""
        deadline = time.monotonic() + timeout_s
        while text not in self.output():
            if time.monotonic() >= deadline:
                raise AssertionError(f"{text!r} not logged by {self.argv}:\n{self.tail(4000)}")
            time.sleep(0.05)

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM, wait, SIGKILL if needed; return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        return self.proc.returncode


def start_namesrv(
    tmp: Path, extra: str = "", *, host: str = "127.0.0.1", wrap: Sequence[str] = ()
) -> tuple[Daemon, str]:
    """Start ``bin/mqnamesrv`` on a free port of ``host`` (under ``wrap``); return it and its
    address."""
    conf = tmp / "namesrv.conf"
    conf.write_text(
        f"listenPort=0\nbindAddress={host}\nkvConfigPath={tmp / 'kv' / 'kvConfig.json'}\n"
        f"configStorePath={tmp / 'kv' / 'namesrv.properties'}\n{extra}",
        encoding="utf-8",
    )
    daemon = Daemon([str(BIN / "mqnamesrv"), "-c", str(conf)], tmp / "logs", wrap)
    match = daemon.wait_for(NAMESRV_BOOT)
    return daemon, match.group(1)


def start_broker(
    tmp: Path,
    namesrv: str,
    *,
    name: str = "broker-a",
    store: Path | None = None,
    extra: str = "",
    tag: str | None = None,
    boot: re.Pattern[str] = BROKER_BOOT,
    host: str = "127.0.0.1",
    wrap: Sequence[str] = (),
    args: Sequence[str] = (),
) -> tuple[Daemon, str]:
    """Start ``bin/mqbroker -n <namesrv> [args...]`` on a free loopback port with tiny store
    files; return it and its ``ip:port``. ``tag`` tells apart brokers of one name (a master and
    its slaves): it names the config file, the default store and the log directory
    (``logs-<tag>``). ``boot``: the line to wait for (:data:`BROKER_UP` also accepts a
    controller-mode broker that waits for its role). ``host``: the address it binds and
    advertises; ``wrap``: see :class:`Daemon`."""
    label = tag or name
    conf = tmp / f"{label}.conf"
    root = store or tmp / label / "store"
    conf.write_text(
        f"brokerName={name}\nbrokerIP1={host}\nbindAddress={host}\nlistenPort=0\n"
        f"storePathRootDir={root}\nmappedFileSizeCommitLog=65536\n"
        f"mappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
        f"registerNameServerPeriod=1000\n{extra}",
        encoding="utf-8",
    )
    logs = tmp / "logs" if tag is None else tmp / f"logs-{tag}"
    daemon = Daemon([str(BIN / "mqbroker"), "-c", str(conf), "-n", namesrv, *args], logs, wrap)
    match = daemon.wait_for(boot)
    return daemon, match.group(2)


def run_bin(
    args: list[str], tmp: Path, timeout_s: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run a short-lived bin/ command and capture its output."""
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=bin_env(tmp / "logs"),
        check=False,
    )


CONTROLLER_BOOT = re.compile(
    r"The Controller Server boot success\. serializeType=JSON, address (\S+)"
)


#: The controller port of a member that has a host (a network namespace) to itself.
CONTROLLER_PORT = 9878


def write_controller_confs(
    tmp: Path, count: int = 3, extra: str = "", hosts: Sequence[str] | None = None
) -> list[Path]:
    """Config files of a ``count``-member controller group with short test timings; ``hosts``:
    one address per member, each a host of its own (port :data:`CONTROLLER_PORT`), instead of
    free loopback ports."""
    if hosts is None:
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(free_ports(count)))
    else:
        peers = ";".join(f"n{i}-{h}:{CONTROLLER_PORT}" for i, h in enumerate(hosts))
    confs = []
    for i in range(count):
        conf = tmp / f"controller-n{i}.conf"
        conf.write_text(
            f"controllerDLegerGroup=group1\ncontrollerDLegerPeers={peers}\n"
            f"controllerDLegerSelfId=n{i}\ncontrollerStorePath={tmp / f'n{i}' / 'raft'}\n"
            f"configStorePath={tmp / f'n{i}' / 'controller.properties'}\n"
            "controllerDLegerHeartBeatTimeIntervalMs=100\ncontrollerDLegerElectionTimeoutMs=600\n"
            "scanNotActiveBrokerInterval=200\nscanInactiveMasterInterval=200\n"
            f"controllerStartupGraceMs=0\n{extra}",
            encoding="utf-8",
        )
        confs.append(conf)
    return confs


def start_controller(conf: Path, tmp: Path, wrap: Sequence[str] = ()) -> tuple[Daemon, str]:
    """Start ``bin/mqcontroller -c conf``; return it and the address it serves on."""
    daemon = Daemon([str(BIN / "mqcontroller"), "-c", str(conf)], tmp / "logs", wrap)
    match = daemon.wait_for(CONTROLLER_BOOT)
    return daemon, match.group(1)


def start_controllers(
    tmp: Path,
    count: int = 3,
    extra: str = "",
    hosts: Sequence[str] | None = None,
    wraps: Sequence[Sequence[str]] | None = None,
) -> tuple[list[Daemon], list[str], list[Path]]:
    """Start a controller group as real processes; return daemons, addresses and configs.
    ``hosts`` and ``wraps``: each member's address and argv prefix (a network namespace)."""
    confs = write_controller_confs(tmp, count, extra, hosts)
    daemons: list[Daemon] = []
    addrs: list[str] = []
    try:
        for i, conf in enumerate(confs):
            daemon, addr = start_controller(conf, tmp, wraps[i] if wraps else ())
            daemons.append(daemon)
            addrs.append(addr)
    except BaseException:
        for d in daemons:
            d.stop()
        raise
    return daemons, addrs, confs
