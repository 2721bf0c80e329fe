"""The etcd users and roles of a secure cluster, and what ``yak up --secure`` gives services."""

from __future__ import annotations

import stat
from pathlib import Path

from yak.cli.up import _etcd_specs, plan_cluster
from yak.etcd_auth import ensure_passwords, service_roles, service_user, setup_commands
from yak.etcd_binary import find_etcd
from yak.metadata.keyspace import Keyspace


def test_each_service_kind_has_its_user_and_the_console_none() -> None:
    assert service_user("coordinator-1") == "yak-coordinator"
    assert service_user("broker-0") == "yak-broker"
    assert service_user("rest-proxy") == "yak-rest-proxy"
    assert service_user("rest-proxy-2") == "yak-rest-proxy"
    assert service_user("schema-registry") == "yak-schema-registry"
    assert service_user("console") is None


def test_only_the_coordinator_writes_security_and_the_proxy_no_partition_state() -> None:
    ks = Keyspace("prod")
    roles = {role.name: role for role in service_roles(ks)}
    registry = roles.pop("yak-schema-registry")
    assert (registry.write, registry.read) == (("/yak/prod/schemas/",), (ks.security_prefix,))
    for role in roles.values():
        assert role.read == ("/yak/prod/",)
        assert all(key.startswith("/yak/prod/") for key in role.write)
    writers = [name for name, role in roles.items() if ks.security_prefix in role.write]
    assert writers == ["yak-coordinator"]  # the proxies send security writes to it
    proxy = roles["yak-rest-proxy"].write
    assert not any(key.startswith(ks.security_prefix) for key in proxy)
    assert ks.partitions_prefix not in proxy
    assert ks.topics_prefix not in proxy
    assert set(roles["yak-broker"].write) == {
        ks.brokers_prefix,
        ks.partitions_prefix,
        f"{ks.root}producers/",  # the Kafka listener's InitProducerId
        ks.groups_prefix,  # and its classic groups
        ks.offsets_prefix,
    }
    assert ks.security_prefix not in roles["yak-broker"].write
    assert ks.controller in roles["yak-coordinator"].write


def test_the_older_layout_lets_the_proxy_write_security_too() -> None:
    ks = Keyspace("prod")
    roles = service_roles(ks, proxy_writes_security=True)
    writers = [r.name for r in roles if ks.security_prefix in r.write]
    assert writers == ["yak-coordinator", "yak-rest-proxy"]


def test_the_setup_keeps_passwords_off_command_lines(tmp_path: Path) -> None:
    passwords = ensure_passwords(tmp_path / "auth")
    steps = setup_commands(Keyspace("local"), passwords)
    for argv, _ in steps:
        assert not any(password in " ".join(argv) for password in passwords.values())
    added = {argv[2]: stdin for argv, stdin in steps if argv[:2] == ["user", "add"]}
    assert added == passwords
    assert steps[-1] == (["auth", "enable"], "")
    assert (
        ["role", "grant-permission", "yak-broker", "readwrite", "/yak/local/brokers/", "--prefix"],
        "",
    ) in steps


def test_passwords_are_private_and_kept(tmp_path: Path) -> None:
    first = ensure_passwords(tmp_path / "auth")
    assert ensure_passwords(tmp_path / "auth") == first
    assert len(set(first.values())) == 5
    for user in first:
        mode = stat.S_IMODE((tmp_path / "auth" / f"{user}.password").stat().st_mode)
        assert mode == 0o600


def test_secure_services_get_https_etcd_and_their_own_user(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", secure=True, etcd_members=3)
    by_name = {spec.name: spec.env for spec in plan.services}
    urls = "https://127.0.0.1:19400,https://127.0.0.1:19402,https://127.0.0.1:19404"
    assert plan.etcd_url == urls
    broker = by_name["broker-0"]
    assert broker["YAK_ETCD"] == urls
    assert broker["YAK_ETCD_USER"] == "yak-broker"
    assert broker["YAK_ETCD_PASSWORD_FILE"].endswith("etcd-auth/yak-broker.password")
    assert broker["YAK_ETCD_CA"].endswith("tls/ca.pem")
    assert by_name["rest-proxy"]["YAK_ETCD_USER"] == "yak-rest-proxy"
    assert "YAK_ETCD_USER" not in by_name["console"]


def test_secure_members_speak_tls_to_each_other_too(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 19400, 1, 1, "local", secure=True, etcd_members=3)
    specs = _etcd_specs(plan, find_etcd())
    cluster = "yak-etcd=https://127.0.0.1:19401,yak-etcd-1=https://127.0.0.1:19403,"
    cluster += "yak-etcd-2=https://127.0.0.1:19405"
    for spec in specs:
        assert f"--initial-cluster={cluster}" in spec.argv
        assert "--peer-client-cert-auth" in spec.argv
        assert "--peer-cert-allowed-cn=yak-etcd-peer" in spec.argv
        assert (spec.url or "").startswith("https://")
