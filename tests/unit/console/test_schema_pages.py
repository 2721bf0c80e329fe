"""The schema pages in process: the console app over a real registry app (an in-memory
store behind an ASGI transport): subjects, a subject's versions and latest schema, one
version, the diff between two, registry errors as error pages, and no registry at all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from yak.metadata.memory_store import MemoryMetadataStore
from yak.sdk.schema_registry import SchemaRegistryClient
from yak_console.app import create_app
from yak_console.pages.schemas import DiffLine, diff_lines
from yak_console.settings import ConsoleSettings
from yak_schema_registry.app import create_app as create_registry
from yak_schema_registry.settings import RegistrySettings

V1 = {"type": "record", "name": "User", "fields": [{"name": "a", "type": "int"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "b", "type": "string", "default": ""}]}
REGISTRY_URL = "http://registry"


def _api(request: httpx.Request) -> httpx.Response:
    return httpx.Response(404, json={"code": "NOT_FOUND", "message": "no", "details": {}})


@pytest.fixture
async def console() -> AsyncIterator[httpx.AsyncClient]:
    """The console with a registry holding ``users-value`` v1 and v2 (and ``refs``)."""
    registry_app = create_registry(RegistrySettings(cluster_id="unit"), store=MemoryMetadataStore())
    to_registry = httpx.ASGITransport(app=registry_app)
    async with SchemaRegistryClient(REGISTRY_URL, transport=to_registry) as registry:
        await registry.register("users-value", json.dumps(V1))
        await registry.register("users-value", json.dumps(V2))
    settings = ConsoleSettings(schema_registry_url=REGISTRY_URL)
    app = create_app(settings, transport=httpx.MockTransport(_api), registry_transport=to_registry)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        yield client


async def test_the_list_links_each_subject_and_the_nav_shows_schemas(
    console: httpx.AsyncClient,
) -> None:
    page = await console.get("/schemas")
    assert page.status_code == 200
    assert 'href="/schemas/users-value"' in page.text
    assert '<a href="/schemas" aria-current="page">Schemas</a>' in page.text


async def test_a_subject_shows_its_versions_its_latest_schema_and_level(
    console: httpx.AsyncClient,
) -> None:
    page = await console.get("/schemas/users-value")
    assert page.status_code == 200
    for version in (1, 2):
        assert f'href="/schemas/users-value/versions/{version}"' in page.text
    assert 'data-testid="schema-version">2<' in page.text
    assert 'data-testid="schema-level">BACKWARD<' in page.text
    assert "&#34;name&#34;: &#34;b&#34;" in page.text  # indented JSON, escaped
    assert 'action="/schemas/users-value/diff"' in page.text


async def test_one_version(console: httpx.AsyncClient) -> None:
    page = await console.get("/schemas/users-value/versions/1")
    assert page.status_code == 200
    assert 'data-testid="schema-id">1<' in page.text
    assert "&#34;b&#34;" not in page.text


async def test_the_diff_between_two_versions(console: httpx.AsyncClient) -> None:
    page = await console.get("/schemas/users-value/diff", params={"old": "1", "new": "2"})
    assert page.status_code == 200
    assert '<span class="line file" data-kind="file">--- users-value v1 (id 1)</span>' in page.text
    assert 'data-kind="add">+      &#34;name&#34;: &#34;b&#34;,</span>' in page.text
    same = await console.get("/schemas/users-value/diff", params={"old": "2"})
    assert 'data-testid="diff-same"' in same.text


async def test_registry_errors_are_error_pages_with_confluents_code(
    console: httpx.AsyncClient,
) -> None:
    missing = await console.get("/schemas/nope")
    assert missing.status_code == 404
    assert "40401" in missing.text
    bad_version = await console.get("/schemas/users-value/versions/9")
    assert bad_version.status_code == 404
    assert "40402" in bad_version.text


async def test_without_a_registry_the_page_says_so_and_the_nav_has_no_link() -> None:
    app = create_app(ConsoleSettings(), transport=httpx.MockTransport(_api))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        page = await client.get("/schemas")
        deeper = await client.get("/schemas/users-value")
    assert page.status_code == 200
    assert 'data-testid="no-registry"' in page.text
    assert 'href="/schemas"' not in page.text
    assert deeper.status_code == 404


def test_diff_lines_are_classed_by_their_first_character() -> None:
    lines = ["--- a\n", "+++ b\n", "@@ -1 +1 @@\n", "-x\n", "+y\n", " z\n"]
    assert [line.kind for line in diff_lines(lines)] == [
        "file",
        "file",
        "hunk",
        "del",
        "add",
        "same",
    ]
    assert diff_lines(["+y\n"]) == [DiffLine("add", "+y")]


def test_the_registry_url_comes_from_the_environment() -> None:
    env = {"YAK_SCHEMA_REGISTRY_URL": "http://127.0.0.1:9460/"}
    assert ConsoleSettings.from_env(env).schema_registry_url == "http://127.0.0.1:9460"
    assert ConsoleSettings.from_env({}).schema_registry_url is None
    with pytest.raises(ValueError, match="schema_registry_url"):
        ConsoleSettings(schema_registry_url="registry:8081")
