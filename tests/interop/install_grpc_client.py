"""Install the real 5.x gRPC RocketMQ client for the proxy's interop tests, in a venv of its own.

``rocketmq-python-client`` 5.1.2 (PyPI) ships protoc output for ``apache.rocketmq.v2`` that
registers the same symbols as ``rocketpy.proxy.pb``: the two cannot be imported into one process
(``TypeError ... duplicate symbol``), so the client lives in ``.venv-interop5`` (or the directory
given as the first argument) and the tests drive it through subprocesses
(``tests/interop/grpc_descriptors.py``, ``tests/interop/grpc_driver.py``). Idempotent; exits 0
when the client imports in that venv, 1 with the reason otherwise.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

CLIENT = "rocketmq-python-client==5.1.2"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO / ".venv-interop5"
PROBE = "import rocketmq.v5.producer, rocketmq.grpc_protocol.service_pb2"


def interop_python(root: Path = DEFAULT_VENV) -> Path:
    """The interpreter of the interop venv."""
    return root / "bin" / "python"


def _probe(python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", PROBE], capture_output=True, text=True, check=False, timeout=120
    )


def main(argv: list[str] | None = None) -> int:
    """Create the venv if needed, install the client, check that it imports."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else DEFAULT_VENV
    python = interop_python(root)
    if python.exists() and _probe(python).returncode == 0:
        print(f"gRPC RocketMQ client ready: {root}")
        return 0
    if not python.exists():
        venv.create(root, with_pip=True)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", CLIENT],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if install.returncode != 0:
        print(f"cannot install {CLIENT}: {install.stderr.strip().splitlines()[-1:]}")
        return 1
    probe = _probe(python)
    if probe.returncode != 0:
        print(f"{CLIENT} does not import: {probe.stderr.strip().splitlines()[-1:]}")
        return 1
    print(f"gRPC RocketMQ client ready: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
