"""Dump the ``apache.rocketmq.v2`` descriptors of a set of generated modules as JSON on stdout.

Run by tests/interop/test_grpc_contract.py twice, each time in its own interpreter: once in the
interop venv on the real client's modules (``rocketmq.grpc_protocol.*_pb2`` of
rocketmq-python-client 5.1.2) and once in ours on ``rocketpy.proxy.pb.*_pb2``. Both register the
same symbols, so they cannot share one process's descriptor pool.

Each file is keyed by its base name (``definition.proto``: the client registers bare names, we
register ``rocketpy/proxy/pb/...``) and given as its ``FileDescriptorProto`` (package, options,
messages with nested types, fields with number, type, label, type name, oneof and proto3
``optional``, enums with values, services with input, output and streaming flags), without the
file's own name and its import list (paths differ by design).

Usage: ``python grpc_descriptors.py MODULE [MODULE ...]``. Needs only protobuf.
"""

from __future__ import annotations

import importlib
import json
import sys

from google.protobuf import descriptor_pb2
from google.protobuf.json_format import MessageToDict


def dump(module_names: list[str]) -> dict[str, object]:
    """File base name -> the file's descriptor as a dict, for each module."""
    out: dict[str, object] = {}
    for name in module_names:
        file_descriptor = importlib.import_module(name).DESCRIPTOR
        proto = descriptor_pb2.FileDescriptorProto()
        file_descriptor.CopyToProto(proto)
        proto.ClearField("name")
        proto.ClearField("dependency")
        out[file_descriptor.name.rsplit("/", 1)[-1]] = MessageToDict(
            proto, preserving_proto_field_name=True
        )
    return out


if __name__ == "__main__":
    json.dump(dump(sys.argv[1:]), sys.stdout, sort_keys=True)
