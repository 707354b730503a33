"""``mqadmin`` controller subcommands, with upstream's flags and output.

Owns: ``getControllerMetaData``, ``getSyncStateSet``, ``electMaster``, ``cleanBrokerMetadata``,
``getControllerConfig`` and ``updateControllerConfig`` (``-a`` names the controller(s); they do not
need a NameServer, except ``getSyncStateSet -c`` which asks one for the cluster's broker names).
Mirrors ``tools/command/controller/*SubCommand`` and ``tools/command/ha/GetSyncStateSetSubCommand``.
Must not: make requests itself (:class:`ControllerAdminClient`).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rocketpy.client.admin import AdminClient
from rocketpy.client.controller_admin import ControllerAdminClient
from rocketpy.remoting.protocol.bodies.controller import ReplicaIdentity

ControllerRunner = Callable[[argparse.Namespace, ControllerAdminClient], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class ControllerCommand:
    """One controller subcommand."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: ControllerRunner


CONTROLLER_COMMANDS: dict[str, ControllerCommand] = {}


def _command(
    name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[[ControllerRunner], ControllerRunner]:
    def wrap(fn: ControllerRunner) -> ControllerRunner:
        CONTROLLER_COMMANDS[name] = ControllerCommand(name, help_text, configure, fn)
        return fn

    return wrap


def _addr(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a",
        "--controllerAddress",
        dest="controller",
        required=True,
        help="the address of controller",
    )


def _addr_list(args: argparse.Namespace) -> list[str]:
    return [a.strip() for a in str(args.controller).strip().split(";") if a.strip()]


def _java(value: object) -> str:
    """``String.valueOf`` (``null`` for None)."""
    return "null" if value is None else str(value)


@_command("getControllerMetaData", "Get controller cluster's metadata.", _addr)
async def get_controller_metadata(args: argparse.Namespace, admin: ControllerAdminClient) -> int:
    """GetControllerMetaDataSubCommand."""
    meta = await admin.metadata(_addr_list(args)[0])
    out = f"\n#ControllerGroup\t{_java(meta.group)}"
    out += f"\n#ControllerLeaderId\t{_java(meta.controller_leader_id)}"
    out += f"\n#ControllerLeaderAddress\t{_java(meta.controller_leader_address)}"
    for peer in (meta.peers or "").split(";"):
        if peer:
            out += f"\n#Peer:\t{peer}"
    print(out)
    return 0


def _sync_opts(p: argparse.ArgumentParser) -> None:
    _addr(p)
    p.add_argument("-c", "--clusterName", dest="cluster", help="which cluster")
    p.add_argument("-b", "--brokerName", dest="broker_name", help="which broker to fetch")
    p.add_argument("-i", "--interval", dest="interval", help="the interval(second) of get info")
    p.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="name server address list")


def _identity(r: ReplicaIdentity) -> str:
    alive = "true" if r.alive else "false"
    return (
        f"ReplicaIdentity{{brokerName='{r.broker_name}', brokerId={r.broker_id}, "
        f"brokerAddress='{r.broker_address}', alive={alive}}}"
    )


async def _broker_names(args: argparse.Namespace) -> list[str] | None:
    if args.broker_name:
        return [args.broker_name.strip()]
    if not args.cluster or not args.namesrv_addr:
        return None
    namesrv = AdminClient(args.namesrv_addr)
    try:
        info = await namesrv.cluster_info()
    finally:
        await namesrv.close()
    return sorted(info.clusters.get(args.cluster.strip(), []))


async def _print_sync_state(args: argparse.Namespace, admin: ControllerAdminClient) -> bool:
    names = await _broker_names(args)
    if names is None:
        print(
            "usage: mqadmin getSyncStateSet -a <controller> (-b <brokerName> | -c <cluster> -n ..)"
        )
        return False
    if not names:
        return True
    info = await admin.sync_state_data(_addr_list(args)[0], names)
    for name, r in info.replicas_info_table.items():
        print(
            f"\n#brokerName\t{name}\n#MasterBrokerId\t{_java(r.master_broker_id)}\n"
            f"#MasterAddr\t{_java(r.master_address)}\n#MasterEpoch\t{r.master_epoch}\n"
            f"#SyncStateSetEpoch\t{r.sync_state_set_epoch}\n"
            f"#SyncStateSetNums\t{len(r.in_sync_replicas)}"
        )
        for member in r.in_sync_replicas:
            print(f"\nInSyncReplica:\t{_identity(member)}")
        for member in r.not_in_sync_replicas:
            print(f"\nNotInSyncReplica:\t{_identity(member)}")
    return True


@_command("getSyncStateSet", "Fetch syncStateSet for target brokers.", _sync_opts)
async def get_sync_state_set(args: argparse.Namespace, admin: ControllerAdminClient) -> int:
    """GetSyncStateSetSubCommand (``-i`` repeats every N seconds until interrupted)."""
    if args.interval is None:
        return 0 if await _print_sync_state(args, admin) else 2
    every = int(args.interval) if str(args.interval).strip() else 3
    while True:
        if not await _print_sync_state(args, admin):
            return 2
        await asyncio.sleep(every)  # a CLI refresh interval, ended by ^C


def _elect_opts(p: argparse.ArgumentParser) -> None:
    _addr(p)
    p.add_argument(
        "-b",
        "--brokerId",
        dest="broker_id",
        type=int,
        required=True,
        help="The id of the broker which requires to become master",
    )
    p.add_argument(
        "-bn",
        "--brokerName",
        dest="broker_name",
        required=True,
        help="The broker name of the replicas that require to be manipulated",
    )
    p.add_argument(
        "-c", "--clusterName", dest="cluster", required=True, help="the clusterName of broker"
    )


@_command("electMaster", "Re-elect the specified broker as master.", _elect_opts)
async def elect_master(args: argparse.Namespace, admin: ControllerAdminClient) -> int:
    """ReElectMasterSubCommand."""
    hdr, group = await admin.elect_master(
        _addr_list(args)[0], args.cluster.strip(), args.broker_name.strip(), args.broker_id
    )
    print(
        f"\n#ClusterName\t{args.cluster.strip()}\n#BrokerName\t{args.broker_name.strip()}"
        f"\n#BrokerMasterAddr\t{_java(hdr.master_address)}\n#MasterEpoch\t"
        f"{_java(hdr.master_epoch)}\n#SyncStateSetEpoch\t{_java(hdr.sync_state_set_epoch)}"
    )
    if group is not None:
        for broker_id, addr in sorted(group.broker_addrs.items()):
            print(f"\t#Broker\t{broker_id}\t{addr}")
    return 0


def _clean_opts(p: argparse.ArgumentParser) -> None:
    _addr(p)
    p.add_argument(
        "-b",
        "--brokerControllerIdsToClean",
        dest="ids",
        help="The brokerController id list which requires to clean metadata. eg: 1;2;3",
    )
    p.add_argument(
        "-bn",
        "--brokerName",
        dest="broker_name",
        required=True,
        help="The broker name of the replicas that require to be manipulated",
    )
    p.add_argument("-c", "--clusterName", dest="cluster", help="The clusterName of broker")
    p.add_argument(
        "-l",
        "--cleanLivingBroker",
        dest="clean_living",
        action="store_true",
        help="Whether clean up living brokers,default value is false",
    )


@_command("cleanBrokerMetadata", "Clean metadata of broker on controller.", _clean_opts)
async def clean_broker_metadata(args: argparse.Namespace, admin: ControllerAdminClient) -> int:
    """CleanControllerBrokerMetaSubCommand."""
    cluster = args.cluster.strip() if args.cluster else None
    if not args.clean_living and not cluster:
        raise ValueError("cleanLivingBroker option is false, clusterName option can not be empty.")
    name = args.broker_name.strip()
    await admin.clean_broker_data(
        _addr_list(args)[0],
        cluster=cluster,
        broker_name=name,
        ids_to_clean=args.ids.strip() if args.ids else None,
        clean_living=args.clean_living,
    )
    print(f"clear broker {name} metadata from controller success! ")
    return 0


@_command("getControllerConfig", "Get controller config.", _addr)
async def get_controller_config(args: argparse.Namespace, admin: ControllerAdminClient) -> int:
    """GetControllerConfigSubCommand."""
    for addr, values in (await admin.controller_config(_addr_list(args))).items():
        print(f"============{addr}============")
        for key, value in values.items():
            print(f"{key:<50}=  {value}")
    return 0


def _update_opts(p: argparse.ArgumentParser) -> None:
    _addr(p)
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


@_command("updateControllerConfig", "Update controller config.", _update_opts)
async def update_controller_config(args: argparse.Namespace, admin: ControllerAdminClient) -> int:
    """UpdateControllerConfigSubCommand."""
    servers = _addr_list(args)
    key, value = args.key.strip(), args.value.strip()
    await admin.update_controller_config(servers, {key: value})
    print(f"update controller config success![{', '.join(servers)}]\n{key} : {value}")
    return 0
