"""``yak up --etcd-members``: ports and folders per member, every service given all of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from yak.cli.up import _etcd_specs, plan_cluster
from yak.etcd_binary import find_etcd


def test_three_members_get_their_ports_and_every_service_all_urls(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", etcd_members=3)
    urls = "http://127.0.0.1:19400,http://127.0.0.1:19402,http://127.0.0.1:19404"
    assert plan.etcd_url == urls
    assert {spec.env["YAK_ETCD"] for spec in plan.services} == {urls}
    assert [plan.etcd_ports(i) for i in range(3)] == [
        (19400, 19401),
        (19402, 19403),
        (19404, 19405),
    ]
    specs = _etcd_specs(plan, find_etcd())
    assert [spec.name for spec in specs] == ["etcd-0", "etcd-1", "etcd-2"]
    cluster = "yak-etcd=http://127.0.0.1:19401,yak-etcd-1=http://127.0.0.1:19403,"
    cluster += "yak-etcd-2=http://127.0.0.1:19405"
    for i, spec in enumerate(specs):
        assert f"--initial-cluster={cluster}" in spec.argv
        assert f"--data-dir={tmp_path / f'etcd-{i}'}" in spec.argv


def test_one_member_keeps_the_old_layout(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local")
    assert plan.etcd_url == "http://127.0.0.1:19400"
    (spec,) = _etcd_specs(plan, find_etcd())
    assert spec.name == "etcd"
    assert "--initial-cluster=yak-etcd=http://127.0.0.1:19401" in spec.argv
    assert f"--data-dir={tmp_path / 'etcd'}" in spec.argv


@pytest.mark.parametrize("count", [0, 2, 4, 7])
def test_only_odd_member_counts_up_to_five(tmp_path: Path, count: int) -> None:
    with pytest.raises(typer.BadParameter, match="use 1, 3 or 5 etcd members"):
        plan_cluster(tmp_path, 19400, 1, 1, "local", etcd_members=count)


def test_a_data_folder_keeps_its_member_count(tmp_path: Path) -> None:
    (tmp_path / "etcd" / "member").mkdir(parents=True)
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", etcd_members=3)
    with pytest.raises(typer.BadParameter, match="holds an etcd of one member"):
        _etcd_specs(plan, find_etcd())
