"""``yak schemas`` against a real registry app in-process (an in-memory store behind an ASGI
transport): every subcommand, its output, its exit status, and where it finds the registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from yak.cli import schemas
from yak.cli.main import app
from yak.metadata.memory_store import MemoryMetadataStore
from yak.sdk.schema_registry import SchemaRegistryClient
from yak_schema_registry.app import create_app
from yak_schema_registry.settings import RegistrySettings

RUNNER = CliRunner()
V1 = {"type": "record", "name": "User", "fields": [{"name": "a", "type": "int"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "b", "type": "string", "default": ""}]}
BREAKING = {**V1, "fields": [{"name": "a", "type": "string"}]}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Every client the CLI makes talks to one in-process registry; the URLs it was given."""
    app_ = create_app(RegistrySettings(cluster_id="unit"), store=MemoryMetadataStore())
    urls: list[str] = []

    def client(url: str, **options: Any) -> SchemaRegistryClient:
        urls.append(url)
        return SchemaRegistryClient(url, transport=httpx.ASGITransport(app=app_), **options)

    monkeypatch.setattr(schemas, "SchemaRegistryClient", client)
    monkeypatch.chdir(tmp_path)  # no .yak/cluster.json around
    monkeypatch.delenv("YAK_SCHEMA_REGISTRY_URL", raising=False)
    return urls


def _yak(*args: str) -> Any:
    return RUNNER.invoke(app, ["schemas", *args])


def _file(tmp_path: Path, name: str, document: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return str(path)


def test_register_list_show_and_diff(registry: list[str], tmp_path: Path) -> None:
    assert _yak("subjects").stdout == ""
    first = _yak("register", "users-value", _file(tmp_path, "v1.avsc", V1))
    assert (first.exit_code, first.stdout) == (0, "id 1\n")
    assert _yak("register", "users-value", _file(tmp_path, "v2.avsc", V2)).stdout == "id 2\n"
    assert _yak("subjects").stdout == "users-value\n"
    assert _yak("versions", "users-value").stdout == "1\n2\n"
    shown = _yak("show", "users-value", "1").stdout.splitlines()
    assert shown[0] == "subject users-value  version 1  id 1  type AVRO"
    assert json.loads("\n".join(shown[1:])) == V1
    diff = _yak("diff", "users-value", "1").stdout.splitlines()
    assert diff[:2] == ["--- users-value v1 (id 1)", "+++ users-value v2 (id 2)"]
    assert '+    {\n+      "name": "b",' in "\n".join(diff)
    assert registry[0] == schemas.DEFAULT_REGISTRY_URL


def test_check_exits_1_with_the_reasons_when_incompatible(
    registry: list[str], tmp_path: Path
) -> None:
    _yak("register", "u", _file(tmp_path, "v1.avsc", V1))
    good = _yak("check", "u", _file(tmp_path, "v2.avsc", V2))
    assert (good.exit_code, good.stdout) == (0, "compatible\n")
    bad = _yak("check", "u", _file(tmp_path, "bad.avsc", BREAKING))
    assert bad.exit_code == 1
    assert bad.stdout.startswith("incompatible\n  reading older data: ")
    refused = _yak("register", "u", _file(tmp_path, "bad.avsc", BREAKING))
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: 409: ")
    assert _yak("versions", "u").stdout == "1\n"


def test_types_follow_the_suffix_or_the_option(registry: list[str], tmp_path: Path) -> None:
    proto = 'syntax = "proto3";\nmessage M { int32 a = 1; }\n'
    assert _yak("register", "p", _file(tmp_path, "m.proto", proto)).exit_code == 0
    assert "type PROTOBUF" in _yak("show", "p").stdout
    changed = _file(tmp_path, "m2.txt", proto.replace("int32", "string"))
    checked = _yak("check", "p", changed, "--type", "protobuf")
    assert checked.exit_code == 1
    assert "FIELD_SCALAR_KIND_CHANGED at #/M/1" in checked.stdout
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert _yak("register", "j", _file(tmp_path, "j.json", schema)).exit_code == 0
    assert "type JSON" in _yak("show", "j").stdout


def test_config_reads_and_sets_levels(registry: list[str], tmp_path: Path) -> None:
    assert _yak("config").stdout == "BACKWARD\n"
    assert _yak("config", "u", "--set", "full").stdout == "FULL\n"
    assert _yak("config", "u").stdout == "FULL\n"
    assert _yak("config", "other").stdout == "BACKWARD\n"  # the global level
    bad = _yak("config", "--set", "SIDEWAYS")
    assert (bad.exit_code, bad.stderr.split(":")[:2]) == (1, ["error", " 42203"])


def test_delete_soft_then_permanent(registry: list[str], tmp_path: Path) -> None:
    _yak("register", "u", _file(tmp_path, "v1.avsc", V1))
    _yak("register", "u", _file(tmp_path, "v2.avsc", V2))
    assert _yak("delete", "u", "--version", "2").stdout == "2\n"
    assert _yak("versions", "u").stdout == "1\n"
    assert _yak("delete", "u").stdout == "1\n"
    assert _yak("subjects").stdout == ""
    assert _yak("subjects", "--deleted").stdout == "u\n"
    assert _yak("delete", "u", "--permanent").stdout == "1\n2\n"
    missing = _yak("show", "u")
    assert (missing.exit_code, missing.stderr.split(":")[1]) == (1, " 40401")


def test_a_missing_file_is_one_line_and_status_1(registry: list[str], tmp_path: Path) -> None:
    result = _yak("register", "u", str(tmp_path / "nope.avsc"))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot read ")


def test_the_registry_url_comes_from_the_option_env_or_cluster_json(
    registry: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    processes = [{"name": "schema-registry", "url": "http://127.0.0.1:19460"}]
    (data / "cluster.json").write_text(json.dumps({"processes": processes}))
    _yak("subjects", "--data-dir", str(data))
    _yak("subjects", "--data-dir", str(data), "--registry-url", "http://option:1")
    monkeypatch.setenv("YAK_SCHEMA_REGISTRY_URL", "http://env:2")
    _yak("subjects", "--data-dir", str(data))
    assert registry == ["http://127.0.0.1:19460", "http://option:1", "http://env:2"]
    assert schemas.schema_type_of(Path("x.AVSC"), None) == "AVRO"
    assert schemas.schema_type_of(Path("x.proto"), "json") == "JSON"
