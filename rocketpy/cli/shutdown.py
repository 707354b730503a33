"""``mqshutdown namesrv|broker|controller``: SIGTERM the running daemons, as upstream's script does.

Owns: finding rocketpy daemon processes by their command line (``/proc/<pid>/cmdline`` names
``rocketpy.cli.<role>``) and signalling them. Upstream greps ``ps`` for the Java main class; the
effect is the same: every matching daemon of this machine receives SIGTERM and stops in order.
``--conf PATH`` narrows it to the daemon started with that config file (several brokers or
controllers often share a host, as ``make cluster`` does). Exit status: 0 when at least one process
was signalled, 1 when none runs, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

ROLES = ("namesrv", "broker", "controller")


def find_daemons(role: str, conf: str | None = None, proc: Path = Path("/proc")) -> list[int]:
    """Pids whose command line runs ``rocketpy.cli.<role>`` (with ``conf`` as its ``-c`` file
    when given), never this process."""
    marker = f"rocketpy.cli.{role}".encode()
    wanted = None if conf is None else {conf.encode(), str(Path(conf).resolve()).encode()}
    pids: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in argv and (wanted is None or wanted & set(argv)):
            pids.append(int(entry.name))
    return sorted(pids)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqshutdown``."""
    parser = argparse.ArgumentParser(prog="mqshutdown", description=__doc__)
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--conf", help="only the daemon started with this -c config file")
    args = parser.parse_args(argv)
    pids = find_daemons(args.role, args.conf)
    if not pids:
        print(f"No mq{args.role} running.")
        return 1
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        print(f"The mq{args.role}({pid}) is running...")
        print(f"Send shutdown request to mq{args.role}({pid}) OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
