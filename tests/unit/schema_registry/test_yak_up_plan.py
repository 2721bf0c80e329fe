"""``yak up --schema-registry``: the registry's place in the plan (the flag's part of
``yak.cli.up``; the rest of the plan is tested in tests/unit/shared/cli/test_up_plan.py)."""

from __future__ import annotations

from pathlib import Path

from yak.cli.up import plan_cluster


def test_the_registry_runs_only_when_asked(tmp_path: Path) -> None:
    without = plan_cluster(tmp_path, 19400, 1, 1, "local")
    assert "schema-registry" not in [spec.name for spec in without.services]
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", schema_registry=True)
    (spec,) = [spec for spec in plan.services if spec.name == "schema-registry"]
    assert spec.url == "http://127.0.0.1:19460"
    assert spec.health_url == "http://127.0.0.1:19460/healthz"
    assert Path(spec.argv[0]).name == "yak-schema-registry"
    assert spec.argv[1:] == ("--host", "127.0.0.1", "--port", "19460")
    assert spec.env["YAK_ETCD"] == "http://127.0.0.1:19400"
    assert spec.env["YAK_CLUSTER_ID"] == "local"
    # The other processes keep their places.
    assert [s.name for s in plan.services][:-1] == [s.name for s in without.services]


def test_in_a_secure_cluster_it_speaks_tls_with_security_and_its_etcd_user(
    tmp_path: Path,
) -> None:
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", secure=True, schema_registry=True)
    by_name = {spec.name: spec for spec in plan.services}
    registry = by_name["schema-registry"]
    assert registry.url == "https://127.0.0.1:19460"
    assert registry.health_url == "https://127.0.0.1:19460/healthz"
    env = registry.env
    assert env["YAK_SECURITY"] == "on"
    assert env["YAK_TLS_CERT"].endswith("tls/schema-registry.pem")
    assert env["YAK_ETCD"].startswith("https://")
    assert env["YAK_ETCD_USER"] == "yak-schema-registry"
    assert env["YAK_ETCD_PASSWORD_FILE"].endswith("etcd-auth/yak-schema-registry.password")
    for client in ("rest-proxy", "console"):
        assert by_name[client].env["YAK_SCHEMA_REGISTRY_URL"] == "https://127.0.0.1:19460"


def test_the_proxies_and_the_console_get_the_registry_url(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", proxies=2, schema_registry=True)
    by_name = {spec.name: spec for spec in plan.services}
    for name in ("rest-proxy", "rest-proxy-1", "console"):
        assert by_name[name].env["YAK_SCHEMA_REGISTRY_URL"] == "http://127.0.0.1:19460"
    assert "YAK_SCHEMA_REGISTRY_URL" not in by_name["broker-0"].env
    without = plan_cluster(tmp_path, 19400, 1, 1, "local")
    assert all("YAK_SCHEMA_REGISTRY_URL" not in spec.env for spec in without.services)
