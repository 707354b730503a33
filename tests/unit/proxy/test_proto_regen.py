"""The committed protoc output is what the committed ``.proto`` files generate.

Regenerates ``rocketpy/proxy/pb`` into a temporary directory with ``rocketpy.tools.gen_proto``
(grpcio-tools pinned in pyproject) and compares every file byte for byte with the committed one,
so an edit of a ``.proto`` without regenerating, or a hand edit of a stub, fails here.
"""

from __future__ import annotations

from pathlib import Path

from rocketpy.proxy.pb import service_pb2
from rocketpy.tools import gen_proto


def test_proto_regenerate_and_diff(tmp_path: Path) -> None:
    produced = gen_proto.generate(tmp_path)
    committed = gen_proto.generated_files()
    assert produced == committed
    assert len(committed) == 9  # definition, service, admin x (_pb2.py, .pyi, _pb2_grpc.py)
    stale = [
        str(rel)
        for rel in committed
        if (tmp_path / rel).read_bytes() != (gen_proto.REPO / rel).read_bytes()
    ]
    assert stale == [], f"regenerate with `python -m rocketpy.tools.gen_proto`: {stale}"


def test_proto_regen_detects_a_stale_stub(tmp_path: Path) -> None:
    """The comparison above can fail: a copy of the tree with one field renumbered regenerates
    to a different descriptor."""
    root = tmp_path / "tree"
    src = root / gen_proto.PROTO_DIR
    src.mkdir(parents=True)
    for proto in gen_proto.proto_files():
        (root / proto).write_bytes((gen_proto.REPO / proto).read_bytes())
    service = src / "service.proto"
    text = service.read_text(encoding="utf-8")
    service.write_text(text.replace("string recall_handle = 5;", "string recall_handle = 6;"))
    out = tmp_path / "out"
    gen_proto.generate(out, root)
    rel = gen_proto.PROTO_DIR / "service_pb2.py"
    assert (out / rel).read_bytes() != (gen_proto.REPO / rel).read_bytes()


def test_generated_service_has_every_messaging_rpc() -> None:
    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    assert service.full_name == "apache.rocketmq.v2.MessagingService"
    assert [m.name for m in service.methods] == [
        "QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "ReceiveMessage",
        "AckMessage", "ForwardMessageToDeadLetterQueue", "PullMessage", "UpdateOffset",
        "GetOffset", "QueryOffset", "EndTransaction", "Telemetry", "NotifyClientTermination",
        "ChangeInvisibleDuration", "RecallMessage", "SyncLiteSubscription",
    ]  # fmt: skip
