"""Every shipped sample under conf/ loads with its daemon's config parser (issues 7 and 8).

``bin/mq* -c <file> -p`` prints the effective configuration and exits 0 even when the file has
keys no settings class knows (the daemons only log those), so a typo in a sample would ship
silently. These tests run the same entry points in-process and also require that every key of
every sample is known.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.cli import broker as broker_cli
from rocketpy.cli import controller as controller_cli
from rocketpy.cli import namesrv as namesrv_cli
from rocketpy.controller.config import ControllerConfig
from rocketpy.ha.config import HAConfig
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.store.config import MessageStoreConfig

CONF = Path(__file__).resolve().parents[2] / "conf"
SAMPLES = sorted(p for p in CONF.rglob("*") if p.is_file() and p.suffix in (".properties", ".conf"))


def _daemon(path: Path) -> str:
    """Which daemon a sample is for, by the shipped naming: controller-*, namesrv*, else broker."""
    if path.name.startswith("controller-"):
        return "controller"
    if path.name.startswith("namesrv"):
        return "namesrv"
    return "broker"


def _unknown_keys(path: Path, daemon: str) -> set[str]:
    """Keys of ``path`` that the daemon's settings classes do not know (as the CLIs compute)."""
    text = path.read_text(encoding="utf-8")
    if daemon == "controller":
        return set(ControllerConfig.load(file_text=text, env={})[1])
    if daemon == "namesrv":
        config, unknown = NamesrvConfig.load(file_text=text, env={})
        if config.enable_controller_in_namesrv:
            return set(unknown) - set(ControllerConfig.keys())
        return set(unknown)
    unknown = set(BrokerConfig.load(file_text=text, env={})[1])
    unknown &= set(MessageStoreConfig.load(file_text=text, env={})[1])
    return unknown & set(HAConfig.load(file_text=text, env={})[1])


MAINS: dict[str, Callable[[list[str] | None], int]] = {
    "broker": broker_cli.main,
    "controller": controller_cli.main,
    "namesrv": namesrv_cli.main,
}


def test_conf_samples_cover_every_layout() -> None:
    """1. Glob conf/**/*.properties and conf/**/*.conf. Expected: the samples of every shipped
    layout are found (top level, controller, controller/quick-start, 2m-noslave, 2m-2s-async,
    2m-2s-sync), so the parametrised test below really checks them all."""
    dirs = {p.parent.relative_to(CONF).as_posix() for p in SAMPLES}
    assert {
        ".",
        "controller",
        "controller/quick-start",
        "2m-noslave",
        "2m-2s-async",
        "2m-2s-sync",
    } <= dirs


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.relative_to(CONF).as_posix())
def test_conf_sample_loads_with_its_daemon_parser(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. Run the sample's daemon entry point with ``-c <sample> -p`` (what ``bin/mq* -c f -p``
    runs). 2. Load the sample with the same settings classes and collect unknown keys.
    Expected: exit code 0 with ``key=value`` lines on stdout; no key unknown to the daemon."""
    for var in ("NAMESRV_ADDR", "ROCKETMQ_HOME"):
        monkeypatch.delenv(var, raising=False)
    daemon = _daemon(path)
    assert MAINS[daemon](["-c", str(path), "-p"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out
    assert all("=" in line for line in out), out[:5]
    assert _unknown_keys(path, daemon) == set(), path
