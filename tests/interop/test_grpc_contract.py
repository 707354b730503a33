"""Our ``apache.rocketmq.v2`` descriptors equal the real 5.x client's, field for field.

The client (rocketmq-python-client 5.1.2, installed into ``.venv-interop5`` by
``install_grpc_client.py``, which ``make test`` runs) and rocketpy each dump their descriptors
from their own interpreter (``grpc_descriptors.py``); the dumps are flattened to
``path -> value`` and compared, so a failure names each differing message, field, number, type,
label, enum value or rpc streaming flag.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.install_grpc_client import interop_python

pytestmark = pytest.mark.interop

HERE = Path(__file__).parent
DUMPER = HERE / "grpc_descriptors.py"
FILES = ("definition", "service", "admin")
THEIRS = [f"rocketmq.grpc_protocol.{f}_pb2" for f in FILES]
OURS = [f"rocketpy.proxy.pb.{f}_pb2" for f in FILES]


def _dump(python: Path, modules: list[str]) -> dict[str, object]:
    result = subprocess.run(
        [str(python), str(DUMPER), *modules],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=HERE.parents[1],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dumped: dict[str, object] = json.loads(result.stdout)
    return dumped


def flatten(value: object, path: str = "") -> dict[str, object]:
    """``{"a": [{"b": 1}]}`` -> ``{"a[0].b": 1}``; lists of named items are keyed by name, so an
    insertion reports one added entry instead of shifting every later index."""
    out: dict[str, object] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            name = item.get("name") if isinstance(item, dict) else None
            out.update(flatten(item, f"{path}[{name if name is not None else i}]"))
    else:
        out[path] = value
    return out


def differences(theirs: dict[str, object], ours: dict[str, object]) -> list[str]:
    """One line per path whose value differs or exists on one side only."""
    a, b = flatten(theirs), flatten(ours)
    return [
        f"{path}: client={a.get(path, '<absent>')!r} rocketpy={b.get(path, '<absent>')!r}"
        for path in sorted(a.keys() | b.keys())
        if a.get(path, "<absent>") != b.get(path, "<absent>")
    ]


def test_flatten_names_a_renumbered_field() -> None:
    theirs = {"x.proto": {"message_type": [{"name": "M", "field": [{"name": "f", "number": 1}]}]}}
    ours = {"x.proto": {"message_type": [{"name": "M", "field": [{"name": "f", "number": 2}]}]}}
    assert differences(theirs, ours) == [
        "x.proto.message_type[M].field[f].number: client=1 rocketpy=2"
    ]


def test_descriptors_equal_the_python_client_5_1_2() -> None:
    python = interop_python()
    if not python.exists():
        pytest.skip("rocketmq-python-client 5.1.2 not installed: run `make test` (or "
                    "`python tests/interop/install_grpc_client.py`)")  # fmt: skip
    theirs = _dump(python, THEIRS)
    ours = _dump(Path(sys.executable), OURS)
    assert sorted(theirs) == ["admin.proto", "definition.proto", "service.proto"]
    flat = flatten(theirs)
    # The dumps are real: the client's service has its 17 rpcs and Code its 53 values.
    assert sum(1 for p in flat if p.startswith("service.proto.service[MessagingService]")
               and p.endswith(".input_type")) == 17  # fmt: skip
    assert sum(1 for p in flat if p.startswith("definition.proto.enum_type[Code].value")
               and p.endswith(".number")) == 53  # fmt: skip
    assert differences(theirs, ours) == []
