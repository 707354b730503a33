"""``mqproxy``'s command line: the shipped sample loads, bad files exit 2 with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.cli import broker as broker_cli
from rocketpy.cli import proxy as proxy_cli

SAMPLE = Path(__file__).resolve().parents[3] / "conf" / "rmq-proxy.json"


def test_conf_sample_rmq_proxy_json_loads(capsys: pytest.CaptureFixture[str]) -> None:
    assert proxy_cli.main(["-pc", str(SAMPLE), "-p"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "rocketMQClusterName=DefaultCluster" in printed
    assert "grpcServerPort=8081" in printed


def test_n_overrides_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert proxy_cli.main(["-pc", str(SAMPLE), "-n", "ns:1", "-p"]) == 0
    assert "namesrvAddr=ns:1" in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"grpcServerPrt": 1}', "did you mean grpcServerPort?"),
        ('{"grpcServerPort": 70000}', "grpcServerPort"),
        ('{"proxyMode": "local"}', "proxyMode"),
        ("[]", "must be a JSON object"),
    ],
)
def test_bad_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as e:
        proxy_cli.main(["-pc", str(path), "-p"])
    assert e.value.code == 2
    assert expected in capsys.readouterr().err


def test_mqbroker_enable_proxy_reads_the_proxy_file_in_local_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mqbroker --enable-proxy -pc`` reads rmq-proxy.json with proxyMode=local and the
    broker's NameServer (``-p`` prints both configurations); a bad key exits 2 before start."""
    assert broker_cli.main(["-n", "ns:9", "--enable-proxy", "-pc", str(SAMPLE), "-p"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "proxyMode=local" in printed
    assert "namesrvAddr=ns:9" in printed
    assert "grpcServerPort=8081" in printed
    bad = tmp_path / "rmq-proxy.json"
    bad.write_text('{"grpcServerPrt": 1}', encoding="utf-8")
    with pytest.raises(SystemExit) as e:
        broker_cli.main(["-n", "ns:9", "--enable-proxy", "-pc", str(bad), "-p"])
    assert e.value.code == 2
    assert "did you mean grpcServerPort?" in capsys.readouterr().err
    assert broker_cli.main(["-n", "ns:9", "-p"]) == 0
    assert "proxyMode=local" not in capsys.readouterr().out
