"""``yak up``'s plan: how many of each process, their names, ports and ids."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from yak.cli.up import plan_cluster


def _port(url: str | None) -> int:
    assert url is not None
    return int(url.rsplit(":", 1)[1])


def test_counts_follow_the_documented_port_layout(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 19400, 3, 2, "local", proxies=2)
    by_name = {spec.name: spec for spec in plan.services}
    assert list(by_name) == [
        "coordinator-0",
        "coordinator-1",
        "broker-0",
        "broker-1",
        "broker-2",
        "rest-proxy",
        "rest-proxy-1",
        "console",
    ]
    ports = {name: _port(spec.url) for name, spec in by_name.items()}
    assert ports == {
        "coordinator-0": 19410,
        "coordinator-1": 19411,
        "broker-0": 19420,
        "broker-1": 19421,
        "broker-2": 19422,
        "rest-proxy": 19430,
        "rest-proxy-1": 19431,
        "console": 19440,
    }
    assert by_name["rest-proxy"].env["YAK_NODE_ID"] == "0"
    assert by_name["rest-proxy-1"].env["YAK_NODE_ID"] == "1"
    assert by_name["console"].env["YAK_API_URL"] == "http://127.0.0.1:19430"
    assert {spec.env["YAK_ETCD"] for spec in plan.services} == {"http://127.0.0.1:19400"}


def test_one_proxy_by_default_keeps_the_old_names(tmp_path: Path) -> None:
    names = [spec.name for spec in plan_cluster(tmp_path, 9400, 1, 1, "local").services]
    assert names == ["coordinator-0", "broker-0", "rest-proxy", "console"]


def test_every_secure_proxy_asks_for_client_certificates(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 9400, 1, 1, "local", proxies=3, secure=True)
    proxies = [spec for spec in plan.services if spec.name.startswith("rest-proxy")]
    assert len(proxies) == 3
    for spec in proxies:
        assert spec.env["YAK_TLS_CLIENT_AUTH"] == "optional"
        assert spec.env["YAK_TLS_CERT"].endswith(f"{spec.name}.pem")
        assert (spec.url or "").startswith("https://")


@pytest.mark.parametrize(
    ("brokers", "coordinators", "proxies"), [(0, 1, 1), (1, 10, 1), (1, 1, 0), (1, 1, 10)]
)
def test_counts_outside_one_to_nine_are_refused(
    tmp_path: Path, brokers: int, coordinators: int, proxies: int
) -> None:
    with pytest.raises(typer.BadParameter):
        plan_cluster(tmp_path, 9400, brokers, coordinators, "local", proxies=proxies)
