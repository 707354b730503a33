"""Regenerate the Python modules of the proxy's gRPC contract from ``rocketpy/proxy/pb/*.proto``.

Owns: running ``grpc_tools.protoc`` (dev dependency ``grpcio-tools``) with ``--python_out``,
``--grpc_python_out`` and ``--pyi_out`` on every ``.proto`` under ``rocketpy/proxy/pb``. The
import root is the repository root, so each file is registered as ``rocketpy/proxy/pb/<x>.proto``
and the generated modules import each other as ``from rocketpy.proxy.pb import definition_pb2``:
no post-processing of imports is needed, and the names never clash with a client's own generated
``apache.rocketmq.v2`` modules on disk (they would still clash in one process's descriptor pool).
Must not: be imported by the daemons (``grpc_tools`` is not a runtime dependency).

Usage: ``python -m rocketpy.tools.gen_proto [--out DIR]`` (default: the source tree itself; the
regenerate-and-diff test writes into a temporary directory and compares byte for byte).
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[2]
PROTO_DIR: Final = Path("rocketpy") / "proxy" / "pb"
#: Suffixes of the files protoc writes for each ``<x>.proto``.
GENERATED_SUFFIXES: Final = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files(root: Path = REPO) -> list[Path]:
    """The ``.proto`` files of the contract, relative to ``root``, sorted."""
    return sorted(p.relative_to(root) for p in (root / PROTO_DIR).glob("*.proto"))


def generated_files(root: Path = REPO) -> list[Path]:
    """Every file protoc writes for the contract, relative to ``root``, sorted."""
    return sorted(
        p.with_name(p.stem + suffix) for p in proto_files(root) for suffix in GENERATED_SUFFIXES
    )


def generate(out: Path, root: Path = REPO) -> list[Path]:
    """Run protoc on the contract under ``root``, writing into ``out`` (same relative paths).

    Returns:
        The generated files, relative to ``out``.

    Raises:
        RuntimeError: protoc failed (its message is printed on stderr).
    """
    from grpc_tools import protoc  # noqa: PLC0415 - dev-only dependency, needed only here

    include = resources.files("grpc_tools") / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"--proto_path={root}",
        f"--proto_path={include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--pyi_out={out}",
        *(str(p) for p in proto_files(root)),
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise RuntimeError(f"protoc exited {rc}")
    return generated_files(root)


def main(argv: list[str] | None = None) -> int:
    """Entry point: regenerate into ``--out`` (default: the repository)."""
    parser = argparse.ArgumentParser(prog="gen_proto", description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO, help="output root (default: the repo)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(args.out / path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
