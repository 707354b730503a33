"""What every daemon's command line shares: upstream flags, config loading, logging, exit codes.

Owns: ``-c`` (a .properties file), ``-p`` (print the effective config and exit 0), ``-n``
(``namesrvAddr``), turning a :class:`ConfigError` into one line on stderr and exit status 2, the log
directory (``ROCKETPY_LOG_DIR`` or ``~/logs/rocketmqlogs``), and refusing unknown keys (exit 2,
naming each with the closest known key: a misspelt key would otherwise leave its default in force
unnoticed). The daemon modules (``cli/namesrv.py``, ...) add their own service and boot line.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from rocketpy.common.errors import ConfigError
from rocketpy.common.logging import DEFAULT_LOG_DIR, setup_logging
from rocketpy.common.properties import parse_properties
from rocketpy.common.settings import RocketSettings

S = TypeVar("S", bound=RocketSettings)
EXIT_CONFIG = 2


def daemon_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The upstream flag set: ``-c``, ``-p``, ``-n``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("-c", "--configFile", dest="config_file", help="config file (.properties)")
    parser.add_argument(
        "-p",
        "--printConfigItem",
        dest="print_config",
        action="store_true",
        help="print all config items and exit",
    )
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="name server address list")
    return parser


def load_settings(
    cls: type[S], args: argparse.Namespace, overrides: Mapping[str, Any] | None = None
) -> tuple[S, list[str]]:
    """Read ``-c`` and the environment into ``cls``; exits 2 with one line on a bad value."""
    text = None
    if args.config_file:
        path = Path(args.config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            print(f"cannot read config file {path}: {e.strerror}", file=sys.stderr)
            raise SystemExit(EXIT_CONFIG) from e
    try:
        return cls.load(file_text=text, env=os.environ, overrides=overrides)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from e


def print_config(settings: RocketSettings) -> None:
    """``-p``: every key=value of the effective configuration, as upstream prints it."""
    for key, value in settings.to_properties().items():
        print(f"{key}={value}")


def log_dir() -> Path:
    """Where JSON-lines logs go."""
    override = os.environ.get("ROCKETPY_LOG_DIR")
    return Path(override) if override else DEFAULT_LOG_DIR


def refuse_unknown(args: argparse.Namespace, *classes: type[RocketSettings]) -> None:
    """Exit 2 with one line when the ``-c`` file has keys none of ``classes`` knows, each with
    the closest known key if one is close. Runs before the values are validated: a misspelt
    mandatory key is reported as misspelt, not as missing."""
    if not args.config_file:
        return
    try:
        text = Path(args.config_file).read_text(encoding="utf-8")
    except OSError:
        return  # load_settings names the file and the error
    known: list[str] = []
    for cls in classes:
        known.extend(cls.keys())
    unknown = sorted(set(parse_properties(text)) - set(known))
    if not unknown:
        return
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        named.append(f"{key} (did you mean {close[0]}?)" if close else key)
    print(
        f"unknown config keys in {args.config_file}: {', '.join(named)}; rocketpy does not "
        "support them, so they would have no effect: fix their spelling or remove them",
        file=sys.stderr,
    )
    raise SystemExit(EXIT_CONFIG)


def start_logging(name: str) -> None:
    """Configure logging for daemon ``name``."""
    setup_logging(name, log_dir=log_dir(), level=os.environ.get("ROCKETPY_LOG_LEVEL", "INFO"))


def boot(line: str) -> None:
    """Print the boot line operators and tests look for, and flush it."""
    print(line, flush=True)
