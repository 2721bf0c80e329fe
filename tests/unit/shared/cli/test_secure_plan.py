"""``yak up --secure``'s plan: TLS and the secret for every service, files the CLI finds."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from yak.cli.secure import apply_cluster_security, cluster_api_key, write_tls_files
from yak.cli.up import plan_cluster


def test_the_default_plan_has_no_security(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 9400, 1, 1, "local")
    assert not plan.secure
    for spec in plan.services:
        assert spec.url is not None
        assert spec.url.startswith("http://")
        assert "YAK_TLS_CERT" not in spec.env
        assert "YAK_SECURITY" not in spec.env


def test_a_secure_plan_turns_on_tls_the_secret_and_security(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 9400, 2, 1, "local", secure=True)
    tls = tmp_path.resolve() / "tls"
    by_name = {spec.name: spec for spec in plan.services}
    for name in ("coordinator-0", "broker-0", "broker-1", "rest-proxy", "console"):
        spec = by_name[name]
        assert spec.url is not None
        assert spec.url.startswith("https://127.0.0.1:")
        assert spec.health_url is not None
        assert spec.health_url.startswith("https://")
        assert spec.env["YAK_TLS_CERT"] == str(tls / f"{name}.pem")
        assert spec.env["YAK_TLS_KEY"] == str(tls / f"{name}-key.pem")
    for spec in plan.services:
        assert spec.env["YAK_TLS_CA"] == str(tls / "ca.pem") == spec.ca_file
        assert spec.env["YAK_SECURITY"] == "on"
        assert spec.env["YAK_SUPER_USERS"] == "User:admin"
        assert spec.env["YAK_CLUSTER_SECRET_FILE"] == str(tmp_path.resolve() / "cluster-secret")
    assert by_name["rest-proxy"].env["YAK_TLS_CLIENT_AUTH"] == "optional"
    assert by_name["console"].env["YAK_API_URL"].startswith("https://")


def test_tls_files_are_written_once_and_private(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 9400, 1, 1, "local", secure=True)
    write_tls_files(tmp_path, plan.services)
    ca = (tmp_path / "tls" / "ca.pem").read_bytes()
    secret = (tmp_path / "cluster-secret").read_text()
    write_tls_files(tmp_path, plan.services)  # a restart keeps the CA and the secret
    assert (tmp_path / "tls" / "ca.pem").read_bytes() == ca
    assert (tmp_path / "cluster-secret").read_text() == secret
    for private in (tmp_path / "cluster-secret", tmp_path / "tls" / "broker-0-key.pem"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600


def test_the_cli_finds_the_ca_secret_and_admin_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("YAK_TLS_CA", "YAK_CLUSTER_SECRET", "YAK_CLUSTER_SECRET_FILE"):
        monkeypatch.setenv(name, "")  # so that monkeypatch restores it, whatever the test sets
        monkeypatch.delenv(name)
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"user": "admin", "api_key": "yak_k"}))
    section = {"ca": "/x/ca.pem", "credentials": str(credentials), "cluster_secret_file": "/s"}
    (tmp_path / "cluster.json").write_text(json.dumps({"security": section}))
    apply_cluster_security(tmp_path)
    assert os.environ["YAK_TLS_CA"] == "/x/ca.pem"
    assert os.environ["YAK_CLUSTER_SECRET_FILE"] == "/s"
    assert cluster_api_key(None, tmp_path) == "yak_k"
    assert cluster_api_key("mine", tmp_path) == "mine"
    assert cluster_api_key(None, tmp_path / "elsewhere") is None
