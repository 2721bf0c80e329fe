"""The compose topology, read from the files: who runs, with what, talking to whom."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.unit.deploy.compose_files import (
    COMPOSE_DIR,
    ETCD_MEMBERS,
    ROOT,
    SCHEMA_REGISTRY,
    SECURE_FILE,
    YAK_SERVICES,
    load,
    scrape_targets,
    services,
    upstream_servers,
)
from yak.etcd_binary import EtcdVersion


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "environments are maps, so overrides merge"
    return {str(k): str(v) for k, v in env.items()}


def _aliases(service: dict[str, Any]) -> set[str]:
    networks = service.get("networks") or {}
    return {alias for net in networks.values() for alias in (net or {}).get("aliases", [])}


def test_the_core_topology_runs_without_profiles() -> None:
    core = {name for name, s in services().items() if not s.get("profiles")}
    assert core == {*ETCD_MEMBERS, *YAK_SERVICES, SCHEMA_REGISTRY[0], "lb"}


def test_three_etcd_members_form_one_cluster_of_the_official_image() -> None:
    found = services()
    for name in ETCD_MEMBERS:
        etcd = found[name]
        assert etcd["image"].startswith(
            ("quay.io/coreos/etcd:v3.5.", "${ETCD_IMAGE:-quay.io/coreos/etcd:v3.5.")
        )
        env = _env(etcd)
        assert env["ETCD_NAME"] == name
        assert env["ETCD_INITIAL_CLUSTER"] == ",".join(f"{m}=http://{m}:2380" for m in ETCD_MEMBERS)
        assert env["ETCD_ADVERTISE_CLIENT_URLS"] == f"http://{name}:2379"
        assert any(v.startswith(f"{name}-data:") for v in etcd["volumes"])
        assert "etcdctl" in etcd["healthcheck"]["test"]


def test_every_etcd_release_deploy_names_is_one_etcd_recommends() -> None:
    """Not 3.5.0-3.5.5 (etcd-io/etcd#13766: a SIGKILL can leave a member inconsistent) nor
    below 3.4.22: compose's default image and anything else under ``deploy/``."""
    named = re.compile(r"etcd[\w./:-]*?:v?(\d+)\.(\d+)\.(\d+)")
    found: dict[str, EtcdVersion] = {}
    for path in (ROOT / "deploy").rglob("*"):
        if path.is_file() and path.suffix in {".yml", ".yaml", ".md", ".env", ""}:
            for match in named.finditer(path.read_text(errors="replace")):
                found[f"{path.relative_to(ROOT)}: {match.group(0)}"] = EtcdVersion(
                    *map(int, match.groups())
                )
    assert any(key.startswith("deploy/compose/docker-compose.yml") for key in found), found
    assert {key: str(v) for key, v in found.items() if not v.recommended} == {}


def test_every_yak_service_points_at_all_three_etcd_members() -> None:
    """``YAK_ETCD`` lists every member, each by its own name (a service moves to the next
    member of its list when one stops answering)."""
    found = services()
    for name in YAK_SERVICES:
        urls = _env(found[name])["YAK_ETCD"].split(",")
        assert [urlsplit(url).hostname for url in urls] == list(ETCD_MEMBERS), name
        assert {urlsplit(url).port for url in urls} == {2379}, name
    for member in ETCD_MEMBERS:
        assert "etcd" in _aliases(found[member]), "the one-shot tools' name for all members"


def test_services_have_ids_ports_and_advertised_names() -> None:
    found = services()
    for name, port in YAK_SERVICES.items():
        service, env = found[name], _env(found[name])
        kind = name.rsplit("-", 1)[0] if name[-1].isdigit() else name
        assert service["command"] == [kind]
        assert int(env["YAK_PORT"]) == port
        assert env["YAK_CLUSTER_ID"]
    for kind, count in (("broker", 3), ("coordinator", 2), ("rest-proxy", 2)):
        ids = sorted(_env(found[f"{kind}-{i}"])["YAK_NODE_ID"] for i in range(count))
        assert ids == [str(i) for i in range(count)], kind
    for name in ("broker-0", "broker-1", "broker-2", "coordinator-0", "coordinator-1"):
        assert _env(found[name])["YAK_ADVERTISED_HOST"] == name


def test_each_broker_keeps_its_data_on_its_own_named_volume() -> None:
    document = load(COMPOSE_DIR / "docker-compose.yml")
    declared = set(document["volumes"])
    used = []
    for i in range(3):
        broker = document["services"][f"broker-{i}"]
        data_dir = _env(broker)["YAK_DATA_DIR"]
        (mount,) = [v for v in broker["volumes"] if v.split(":")[1] == data_dir]
        volume = mount.split(":")[0]
        assert volume in declared, f"broker-{i}: {volume} is not a named volume"
        used.append(volume)
    assert len(set(used)) == 3


def test_the_load_balancer_spreads_over_both_proxies() -> None:
    expected = [f"rest-proxy-{i}:{YAK_SERVICES[f'rest-proxy-{i}']}" for i in range(2)]
    assert upstream_servers(COMPOSE_DIR / "nginx.conf") == expected
    assert upstream_servers(COMPOSE_DIR / "nginx.secure.conf") == expected
    lb = services()["lb"]
    assert lb["image"].split(":-")[-1].startswith(("nginx:", "haproxy:"))
    assert set(lb["depends_on"]) == {"rest-proxy-0", "rest-proxy-1"}
    assert all(d["condition"] == "service_healthy" for d in lb["depends_on"].values())
    assert any(v.startswith("./nginx.conf:") for v in lb["volumes"])


def test_the_schema_registry_is_published_and_named_to_the_proxies_and_the_console() -> None:
    name, port = SCHEMA_REGISTRY
    found = services()
    registry, env = found[name], _env(found[name])
    assert registry["command"] == ["yak-schema-registry"]
    assert int(env["YAK_PORT"]) == port
    assert [urlsplit(u).hostname for u in env["YAK_ETCD"].split(",")] == list(ETCD_MEMBERS)
    assert env["YAK_CLUSTER_ID"]
    assert [p.rsplit(":", 1)[-1] for p in registry["ports"]] == [str(port)]
    assert "${YAK_SCHEMA_REGISTRY_PORT:-9460}" in registry["ports"][0]
    for client in ("rest-proxy-0", "rest-proxy-1", "console"):
        assert _env(found[client])["YAK_SCHEMA_REGISTRY_URL"] == f"http://{name}:{port}", client
    targets = scrape_targets(COMPOSE_DIR / "prometheus" / "prometheus.yml")
    assert targets[name] == [f"{name}:{port}"]


def test_the_console_uses_the_api_through_the_load_balancer() -> None:
    console = services()["console"]
    assert _env(console)["YAK_API_URL"] == "http://lb:9430"
    published = {p.split(":")[-1] for p in services()["lb"]["ports"] + console["ports"]}
    assert published == {"9430", "9440"}


def test_every_long_running_service_has_a_health_check() -> None:
    """Yak services inherit the image's HEALTHCHECK (tested with the Dockerfile); every other
    service declares its own."""
    for name, service in services().items():
        if name in YAK_SERVICES or name == SCHEMA_REGISTRY[0]:
            assert "healthcheck" not in service or not service["healthcheck"].get("disable")
        else:
            assert service["healthcheck"]["test"], name


@pytest.mark.parametrize(
    ("profile", "members"),
    [("monitoring", {"prometheus", "grafana"}), ("spark", {"spark-master", "spark-worker"})],
)
def test_optional_profiles(profile: str, members: set[str]) -> None:
    assert {n for n, s in services().items() if profile in s.get("profiles", [])} == members


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus.secure.yml"])
def test_prometheus_scrapes_every_service(config: str) -> None:
    targets = {t for ts in scrape_targets(COMPOSE_DIR / "prometheus" / config).values() for t in ts}
    for name, port in YAK_SERVICES.items():
        assert f"{name}:{port}" in targets, name
    assert {f"{m}:2379" for m in ETCD_MEMBERS} <= targets


def _dashboard() -> dict[str, Any]:
    found = json.loads((COMPOSE_DIR / "grafana" / "dashboards" / "yak.json").read_text())
    assert isinstance(found, dict)
    return found


def _expressions(dashboard: dict[str, Any]) -> str:
    return " ".join(
        t["expr"] for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]
    )


def test_grafana_is_provisioned_with_the_datasource_and_the_dashboard() -> None:
    provisioning = COMPOSE_DIR / "grafana" / "provisioning"
    (datasource,) = load(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    (provider,) = load(provisioning / "dashboards" / "yak.yml")["providers"]
    grafana = services()["grafana"]
    assert any(v.endswith(f":{provider['options']['path']}:ro") for v in grafana["volumes"])
    dashboard = _dashboard()
    exprs = _expressions(dashboard)
    for metric in (
        "yak_broker_topic_bytes_in_total",  # produce bytes per topic
        "yak_broker_topic_bytes_out_total",  # consume bytes per topic
        "yak_broker_topic_records_in_total",
        "yak_broker_topic_records_out_total",
        "yak_http_request_duration_seconds_bucket",
        "yak_coordinator_under_replicated_partitions",
        "yak_coordinator_offline_partitions",
        "yak_broker_isr_shrinks_total",
        "yak_broker_isr_expands_total",
        "yak_consumer_group_topic_lag",
    ):
        assert metric in exprs, metric
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == datasource["uid"], panel["title"]


def test_every_metric_on_the_dashboard_is_one_the_services_export() -> None:
    """The names in the queries, less Prometheus's suffixes, are declared in the code."""
    code = " ".join(
        path.read_text()
        for folder in (ROOT / "services", ROOT / "shared")
        for path in folder.rglob("*.py")
    )
    declared = set(re.findall(r'"(yak_[a-z_]+)"', code))
    used = set(re.findall(r"\b(yak_[a-z_]+)", _expressions(_dashboard())))
    assert used
    for name in used:
        base = re.sub(r"_(total|bucket|count|sum)$", "", name)
        assert base in declared or name in declared, f"{name} is not exported by any service"


def test_spark_runs_the_pipelines_from_a_shared_folder() -> None:
    found = services()
    for name in ("spark-master", "spark-worker"):
        volumes = found[name]["volumes"]
        assert any(v.startswith("../../pipelines:") for v in volumes), name
    assert "spark://spark-master:7077" in found["spark-worker"]["command"]


def test_the_secure_override_turns_security_on_everywhere() -> None:
    secure = services(SECURE_FILE)
    for name in YAK_SERVICES:
        env = _env(secure[name])
        assert env["YAK_SECURITY"] == "on"
        assert env["YAK_TLS_CERT"].endswith(f"/tls/{name}.pem")
        assert env["YAK_TLS_KEY"].endswith(f"/tls/{name}-key.pem")
        assert env["YAK_CLUSTER_SECRET_FILE"]
        assert secure[name]["depends_on"]["secure-init"]["condition"] == (
            "service_completed_successfully"
        )
    assert _env(secure["console"])["YAK_API_URL"] == "https://lb:9430"
    name, port = SCHEMA_REGISTRY
    registry = _env(secure[name])
    assert registry["YAK_SECURITY"] == "on"
    assert registry["YAK_TLS_CERT"].endswith(f"/tls/{name}.pem")
    assert registry["YAK_ETCD_USER"] == "yak-schema-registry"
    assert secure[name]["depends_on"]["etcd-init"]["condition"] == (
        "service_completed_successfully"
    )
    for client in ("rest-proxy-0", "rest-proxy-1", "console"):
        assert _env(secure[client])["YAK_SCHEMA_REGISTRY_URL"] == f"https://{name}:{port}"
    assert _env(secure["rest-proxy-0"])["YAK_TLS_CLIENT_AUTH"] == "optional"
    assert secure["secure-init"]["command"][-2].endswith("secure_init.py")


def test_secure_init_issues_a_certificate_for_every_yak_service() -> None:
    path = COMPOSE_DIR / "secure" / "secure_init.py"
    spec = importlib.util.spec_from_file_location("secure_init", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.SERVICES) == {*YAK_SERVICES, SCHEMA_REGISTRY[0]}
    assert module.hosts_of("rest-proxy-1") == ("rest-proxy-1", "lb", "localhost", "127.0.0.1")
    assert module.hosts_of("broker-0") == ("broker-0", "localhost", "127.0.0.1")
