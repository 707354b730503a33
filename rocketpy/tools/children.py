"""Daemons started as child processes by the benchmark tools, and free loopback ports.

Owns: :func:`spawn` (start ``python <args>`` with stdout/stderr in files, wait for its boot line),
:func:`stop` (SIGTERM, SIGKILL after a deadline), :func:`spawn_namesrv_and_broker` (the pair
every broker benchmark starts) and :func:`free_ports`. Must not: import daemon
packages (the tools drive daemons as an operator would).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BOOT_TIMEOUT_S = 20.0
#: Boot lines; the group is the listening port.
NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address \S+:(\d+)")
BROKER_BOOT = re.compile(r"The broker\[\S+, \S+:(\d+)\] boot success\.")


@dataclass(slots=True)
class Child:
    """A started daemon and the first group of its boot line (its address or port)."""

    proc: subprocess.Popen[bytes]
    booted: str


def spawn(
    args: list[str],
    boot: re.Pattern[str],
    workdir: Path,
    name: str,
    *,
    timeout_s: float = BOOT_TIMEOUT_S,
    prefix: Sequence[str] = (),
) -> Child:
    """Run ``python <args>`` (output in ``workdir/<name>.out|.err``, logs under
    ``workdir/logs/<name>``) until ``boot`` matches its stdout; ``prefix``: a command it runs
    under (a profiler).

    Raises:
        RuntimeError: it exited or printed no boot line within ``timeout_s``.
    """
    out = workdir / f"{name}.out"
    env = dict(os.environ, ROCKETPY_LOG_DIR=str(workdir / "logs" / name))
    with out.open("wb") as stdout, (workdir / f"{name}.err").open("wb") as stderr:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and modules
            [*prefix, sys.executable, *args], stdout=stdout, stderr=stderr, env=env
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = boot.search(out.read_text(encoding="utf-8", errors="replace"))
        if match:
            return Child(proc, match.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{name} did not boot; see {workdir / (name + '.err')}")


def stop(child: Child) -> None:
    """SIGTERM ``child`` and wait; SIGKILL it after 15 s."""
    if child.proc.poll() is None:
        child.proc.terminate()
        try:
            child.proc.wait(15)
        except subprocess.TimeoutExpired:
            child.proc.kill()


def spawn_namesrv_and_broker(
    workdir: Path,
    broker_conf: str,
    broker_args: tuple[str, ...] = (),
    *,
    broker_prefix: Sequence[str] = (),
    broker_boot_s: float = BOOT_TIMEOUT_S,
) -> list[Child]:
    """A NameServer and one broker on loopback ports, files under ``workdir``: ``broker_conf``
    is added to the broker's loopback, port-0 and store-root lines, ``broker_args`` to its
    command line; ``broker_prefix`` and ``broker_boot_s`` as :func:`spawn`'s. Returns
    [namesrv, broker]; whatever started is stopped again if the broker does not boot."""
    conf = workdir / "broker.conf"
    conf.write_text(
        "brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\n"
        f"storePathRootDir={workdir / 'store'}\n{broker_conf}",
        encoding="utf-8",
    )
    (workdir / "namesrv.conf").write_text(
        f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={workdir / 'kv.json'}\n",
        encoding="utf-8",
    )
    ns = spawn(
        ["-m", "rocketpy.cli.namesrv", "-c", str(workdir / "namesrv.conf")],
        NAMESRV_BOOT,
        workdir,
        "namesrv",
    )
    argv = ["-m", "rocketpy.cli.broker", "-c", str(conf), "-n", f"127.0.0.1:{ns.booted}"]
    try:
        broker = spawn(
            [*argv, *broker_args],
            BROKER_BOOT,
            workdir,
            "broker",
            timeout_s=broker_boot_s,
            prefix=broker_prefix,
        )
    except BaseException:
        stop(ns)
        raise
    return [ns, broker]


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free right now (for configs that list every peer)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()
