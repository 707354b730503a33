"""Install the real C++-based RocketMQ client for the interop tests, into the running interpreter's
env.

``rocketmq-client-python`` 2.0.0 (PyPI) is a ctypes binding that needs ``librocketmq.so``; that
library ships inside the ``rocketmq-python-cvs`` 2.1.0.3 source package, so we download that sdist
and copy the library next to the binding (spec remoting.md lists this client's quirks). Idempotent;
exits 0 when the binding imports afterwards, 1 with the reason otherwise.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

BINDING = "rocketmq-client-python==2.0.0"
LIBRARY_SDIST = "rocketmq-python-cvs==2.1.0.3"


def _binding_dir() -> Path | None:
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def main() -> int:
    """Install the binding and its library; print what was done."""
    if _binding_dir() is None:
        _pip("install", BINDING)
    target = _binding_dir()
    if target is None:
        print(f"cannot import the rocketmq binding after installing {BINDING}")
        return 1
    lib = target / "librocketmq.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory() as tmp:
            _pip("download", "--no-deps", "--no-binary", ":all:", "-d", tmp, LIBRARY_SDIST)
            sdist = next(Path(tmp).glob("rocketmq-python-cvs-*.tar.gz"))
            with tarfile.open(sdist) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("/librocketmq.so"))
                tar.extract(member, tmp, filter="data")
                shutil.copy(Path(tmp) / member.name, lib)
    probe = subprocess.run(
        [sys.executable, "-c", "import rocketmq.client"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        print(f"rocketmq binding does not load: {probe.stderr.strip().splitlines()[-1:]}")
        return 1
    print(f"C++ RocketMQ client ready: {lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
