"""The ``mqadmin`` command registry and the helpers its command modules share.

Owns: :class:`Command`, :data:`COMMANDS` and :func:`command` (``cli/admin.py`` builds the parser
from them), and the formatting helpers upstream's commands use (``UtilAll`` date formats,
``frontStringAtLeast``, Java's ``Boolean.parseBoolean``). Must not: make requests itself.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rocketpy.client.admin import AdminClient, AdminError

Runner = Callable[[argparse.Namespace, AdminClient], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Runner


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None] | None = None
) -> Callable[[Runner], Runner]:
    """Register a subcommand."""

    def wrap(fn: Runner) -> Runner:
        COMMANDS[name] = Command(name, help_text, configure or (lambda p: None), fn)
        return fn

    return wrap


def printf(fmt: str, *args: object) -> None:
    """``System.out.printf(fmt + "%n", args)``: upstream's column formats kept verbatim."""
    print(fmt % args)


def java_bool(text: str) -> bool:
    """``Boolean.parseBoolean``: only ``true`` (any case) is true."""
    return text.strip().lower() == "true"


def human_ms(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS``, local time."""
    when = datetime.datetime.fromtimestamp(ms / 1000)  # upstream prints local time
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def date_seconds(ms: int) -> str:
    """``UtilAll.formatDate(.., YYYY_MM_DD_HH_MM_SS)``, local time."""
    when = datetime.datetime.fromtimestamp(ms / 1000)  # upstream prints local time
    return when.strftime("%Y-%m-%d %H:%M:%S")


def front(text: str, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``size`` leading characters."""
    return text[:size]


def broker_or_cluster(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The ``-b brokerAddr | -c clusterName`` option group."""
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address")
    group.add_argument("-c", "--clusterName", dest="cluster_name", help="cluster name")


async def target_addrs(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    """``-b`` as given, or the masters of ``-c``.

    Raises:
        AdminError: the cluster has no master.
    """
    if args.broker_addr:
        return [args.broker_addr.strip()]
    addrs = await admin.master_addrs(args.cluster_name.strip())
    if not addrs:
        raise AdminError(f"no master broker in cluster {args.cluster_name!r}")
    return addrs


_ATTRIBUTE_OPTIONS = frozenset({"-a", "--attributes"})


def attach_attribute_values(argv: list[str]) -> list[str]:
    """``-a -key`` / ``--attributes -key`` (delete an attribute) as commons-cli reads them:
    argparse takes a value starting with ``-`` for an option and refuses the command, so such a
    value is attached to its option (``-a-key``, ``--attributes=-key``). A following token that
    looks like a short option (``-n``) or a long one is left alone."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if arg in _ATTRIBUTE_OPTIONS and len(nxt) > 2 and nxt[0] == "-" and nxt[1] != "-":
            out.append(f"{arg}{nxt}" if arg == "-a" else f"{arg}={nxt}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out
