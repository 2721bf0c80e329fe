"""Hostile names on a real cluster: every route that takes a name refuses them, and nothing is
written for them — not on disk outside the brokers' data folders, not in etcd.

One etcd, a coordinator, a broker, two rest-proxies and the console: proxy 0 and the console
with security off (the names reach validation), proxy 1 with security on, called by a
super-user (every name goes through the guard's ACL checks and audit first). A table of
routes (the proxy's native and Confluent v2 APIs, share groups' admin and record routes, the
security admin API, the coordinator's admin API, the console's pages and forms) times a table
of names (``..``, ``../x``, ``%2e%2e``, NUL, control characters, look-alike letters, 250 and
10,000 characters, ...), each sent twice where the name fits a request line as typed:
percent-encoded (the server sees the name itself) and raw (the server decodes ``%2e%2e`` to
``..``). Every answer must be a 4xx with one of the documented codes of its dialect — never a
2xx, never a 5xx; a route that would *create* something must refuse the name itself
(400/422), not merely miss it (404). Afterwards no path appeared under the test's temp folder
(outside the logs) and no etcd key was written. Oversized bodies answer 413 and write nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from tests.integration.rest_proxy.conftest import V2, V2_JSON
from tests.integration.rest_proxy.test_security import _cli
from tests.integration.security.helpers import ready_topic
from tests.integration.security.raw_http import Answer, request
from yak.etcd_server import EmbeddedEtcd
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace

pytestmark = pytest.mark.integration

TOPIC = "legit"
GROUP = "legit-group"
INSTANCE = "legit-instance"
SHARE_GROUP = "legit-share-group"
SHARE_STATE_TOPIC = "__yak_share_state"
MAX_BODY = 200_000

#: Names no route may accept: traversal, encodings of it, separators, NUL and control
#: characters, look-alikes of legal letters, too long, empty, shell- and flag-like.
HOSTILE = [
    "..",
    ".",
    "../x",
    "..%2f",
    "..%2fx",
    "%2e%2e",
    "%2e%2e%2f",
    "%2e%2e%2fetc",
    "..\\x",
    "a/b",
    "a\\b",
    "/abs",
    "%00",
    "a\x00b",
    "a\x01b",
    "a\nb",
    "a\rb",
    "a b",
    "t\u043epic",  # Cyrillic o
    "\uff54opic",  # fullwidth t
    "topic\u200b",  # zero-width space
    "x" * 250,
    "x" * 10_000,
    "a%b",
    "a?b",
    "a#b",
    "a:b",
    "a*",
    "$(id)",
]
#: Partition values that are not a partition number.
BAD_PARTITIONS = ["-1", "..", "%2e%2e", "1.5", "1e3", "0x1", "+1", "1 ", "9" * 30, "%00"]

#: Codes a refusal of a hostile name may carry, per dialect.
NATIVE_CODES = {
    "INVALID_TOPIC_EXCEPTION",
    "INVALID_GROUP_ID",
    "INVALID_REQUEST",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNKNOWN_MEMBER_ID",
    "GROUP_ID_NOT_FOUND",
    "RESOURCE_NOT_FOUND",
    "NOT_FOUND",
    "METHOD_NOT_ALLOWED",
}
V2_CODES = {40002, 422, 42204, 42205, 400, 40401, 40402, 40403, 40405, 404, 405}
#: What a creating route must answer: the name itself refused.
REFUSED = {400, 422}


class Route(NamedTuple):
    """A request with ``{name}`` somewhere: the service, method, target, body, and whether
    it would create something (then only a refusal of the name will do)."""

    service: str  # proxy, coordinator, console
    method: str
    target: str
    body: str = ""
    content_type: str = "application/json"
    creates: bool = False
    #: The name is in the body (JSON-escaped) rather than the target.
    in_body: bool = False
    #: An empty name means "none given" (Confluent's optional consumer name): not sent.
    empty_is_none: bool = False


_J = "application/json"
_FORM = "application/x-www-form-urlencoded"
_RECORDS = json.dumps({"records": [{"value": "x"}], "value_encoding": "string"})
_V2_RECORDS = json.dumps({"records": [{"value": 1}]})
_ACQUIRE = json.dumps({"topics": [TOPIC], "timeout_ms": 0})
_SHARE_ACK = json.dumps(
    {
        "member_id": "legit-member",
        "acknowledgements": [{"topic": TOPIC, "partition": 0, "offset": 0, "type": "accept"}],
    }
)
_BATCH = json.dumps(
    {"producer_id": 1, "producer_epoch": 0, "base_sequence": 0, "records": [{"value": "eA=="}]}
)

PATH_ROUTES = [
    # Confluent v2: topics and partitions
    Route("proxy", "GET", "/topics/{name}"),
    Route("proxy", "GET", "/topics/{name}/partitions"),
    Route("proxy", "GET", "/topics/{name}/partitions/0"),
    Route("proxy", "GET", "/topics/{name}/partitions/0/offsets"),
    Route("proxy", "POST", "/topics/{name}", _V2_RECORDS, V2_JSON),
    Route("proxy", "POST", "/topics/{name}/partitions/0", _V2_RECORDS, V2_JSON),
    # Confluent v2: consumers (group names, then instance names)
    Route("proxy", "POST", "/consumers/{name}", "{}", V2, creates=True),
    Route("proxy", "DELETE", f"/consumers/{GROUP}/instances/{{name}}", "", V2),
    Route(
        "proxy",
        "POST",
        f"/consumers/{GROUP}/instances/{{name}}/subscription",
        json.dumps({"topics": [TOPIC]}),
        V2,
    ),
    Route("proxy", "GET", f"/consumers/{GROUP}/instances/{{name}}/subscription"),
    Route("proxy", "GET", f"/consumers/{GROUP}/instances/{{name}}/records"),
    Route(
        "proxy",
        "POST",
        f"/consumers/{GROUP}/instances/{{name}}/offsets",
        json.dumps({"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}),
        V2,
    ),
    Route("proxy", "GET", f"/consumers/{GROUP}/instances/{{name}}/offsets?x=1", "", V2),
    Route(
        "proxy",
        "POST",
        f"/consumers/{GROUP}/instances/{{name}}/positions/beginning",
        json.dumps({"partitions": [{"topic": TOPIC, "partition": 0}]}),
        V2,
    ),
    # native: topics, records, partitions
    Route("proxy", "GET", "/api/v1/topics/{name}"),
    Route("proxy", "DELETE", "/api/v1/topics/{name}"),
    Route(
        "proxy",
        "PATCH",
        "/api/v1/topics/{name}/configs",
        json.dumps({"set": {"retention.ms": "1000"}}),
    ),
    Route("proxy", "POST", "/api/v1/topics/{name}/partitions", '{"count": 2}'),
    Route("proxy", "POST", "/api/v1/topics/{name}/records", _RECORDS),
    Route("proxy", "GET", "/api/v1/topics/{name}/partitions/0/records"),
    Route("proxy", "GET", "/api/v1/topics/{name}/partitions/0/offsets"),
    Route("proxy", "POST", "/api/v1/topics/{name}/partitions/0/batches", _BATCH),
    # native: groups and members
    Route(
        "proxy",
        "POST",
        "/api/v1/groups/{name}/members",
        json.dumps({"topics": [TOPIC]}),
        creates=True,
    ),
    Route("proxy", "GET", "/api/v1/groups/{name}"),
    Route("proxy", "DELETE", "/api/v1/groups/{name}"),
    Route(
        "proxy",
        "POST",
        "/api/v1/groups/{name}/offsets/reset",
        json.dumps({"to": "earliest", "topics": [TOPIC], "force": True}),
        creates=True,
    ),
    Route("proxy", "GET", f"/api/v1/groups/{GROUP}/members/{{name}}"),
    Route("proxy", "DELETE", f"/api/v1/groups/{GROUP}/members/{{name}}"),
    Route("proxy", "GET", f"/api/v1/groups/{GROUP}/members/{{name}}/records?timeout_ms=0"),
    Route(
        "proxy",
        "POST",
        f"/api/v1/groups/{GROUP}/members/{{name}}/commit",
        json.dumps({"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}),
    ),
    # native: share groups (admin, then records: acquire, acknowledge, SSE)
    Route("proxy", "GET", "/api/v1/share-groups/{name}"),
    Route("proxy", "PATCH", "/api/v1/share-groups/{name}", '{"max_delivery_attempts": 4}'),
    Route("proxy", "DELETE", "/api/v1/share-groups/{name}"),
    Route("proxy", "POST", "/api/v1/share-groups/{name}/acquire", _ACQUIRE),
    Route("proxy", "POST", "/api/v1/share-groups/{name}/acknowledgements", _SHARE_ACK),
    Route("proxy", "GET", f"/api/v1/share-groups/{{name}}/stream?topic={TOPIC}"),
    # the security admin API: user names and principals
    Route("proxy", "DELETE", "/api/v1/security/users/{name}"),
    Route("proxy", "POST", "/api/v1/security/users/{name}/keys", "{}"),
    Route(
        "proxy",
        "PUT",
        "/api/v1/security/users/{name}/password",
        '{"password": "a-password"}',
    ),
    Route("proxy", "GET", "/api/v1/security/quotas/User:{name}"),
    Route(
        "proxy",
        "PUT",
        "/api/v1/security/quotas/User:{name}",
        '{"produce_bytes_per_s": 1}',
        creates=True,
    ),
    # the coordinator's admin API
    Route("coordinator", "GET", "/admin/v1/topics/{name}"),
    Route("coordinator", "DELETE", "/admin/v1/topics/{name}"),
    Route(
        "coordinator",
        "PATCH",
        "/admin/v1/topics/{name}/configs",
        json.dumps({"set": {"retention.ms": "1000"}}),
    ),
    Route("coordinator", "POST", "/admin/v1/topics/{name}/partitions", '{"count": 2}'),
    Route("coordinator", "GET", "/admin/v1/groups/{name}"),
    Route("coordinator", "GET", "/admin/v1/share-groups/{name}"),
    Route("coordinator", "PATCH", "/admin/v1/share-groups/{name}", '{"lock_duration_ms": 5000}'),
    Route("coordinator", "DELETE", "/admin/v1/share-groups/{name}"),
    # the console's pages and forms
    Route("console", "GET", "/topics/{name}"),
    Route("console", "GET", "/topics/{name}/configs"),
    Route("console", "GET", "/topics/{name}/messages"),
    Route("console", "GET", "/topics/{name}/messages/export.json"),
    Route("console", "GET", "/topics/{name}/produce"),
    Route("console", "POST", "/topics/{name}/produce", "value=x", _FORM),
    Route("console", "POST", "/topics/{name}/configs", "retention.ms=1000", _FORM),
    Route("console", "POST", "/topics/{name}/delete", f"confirm={TOPIC}", _FORM),
    Route("console", "GET", "/groups/{name}"),
    Route("console", "POST", "/groups/{name}/reset", "to=earliest", _FORM),
    Route("console", "POST", "/groups/{name}/delete", "", _FORM),
]


def _json_name(name: str) -> str:
    return json.dumps(name)[1:-1]


BODY_ROUTES = [
    Route(
        "proxy",
        "POST",
        "/api/v1/topics",
        '{"name": "{name}", "partitions": 1, "replication_factor": 1}',
        creates=True,
        in_body=True,
    ),
    Route(
        "coordinator",
        "POST",
        "/admin/v1/topics",
        '{"name": "{name}", "partitions": 1, "replication_factor": 1}',
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy", "POST", "/api/v1/security/users", '{"name": "{name}"}', creates=True, in_body=True
    ),
    Route(
        "proxy", "POST", "/api/v1/share-groups", '{"name": "{name}"}', creates=True, in_body=True
    ),
    Route(
        "coordinator",
        "POST",
        "/admin/v1/share-groups",
        '{"name": "{name}"}',
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        "/api/v1/share-groups",
        '{"name": "legit-2", "dead_letter_topic": "{name}"}',
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/api/v1/share-groups/{SHARE_GROUP}/acquire",
        '{"topics": ["{name}"], "timeout_ms": 0}',
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/api/v1/share-groups/{SHARE_GROUP}/acknowledgements",
        '{"member_id": "m", "acknowledgements": [{"topic": "{name}", "partition": 0, '
        '"offset": 0, "type": "accept"}]}',
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/consumers/{GROUP}",
        '{"name": "{name}"}',
        V2,
        creates=True,
        in_body=True,
        empty_is_none=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/api/v1/groups/{GROUP}/members",
        '{"member_id": "{name}", "topics": ["' + TOPIC + '"]}',
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/api/v1/groups/{GROUP}/members",
        '{"topics": ["{name}"]}',
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/consumers/{GROUP}/instances/{INSTANCE}/subscription",
        '{"topics": ["{name}"]}',
        V2,
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/consumers/{GROUP}/instances/{INSTANCE}/assignments",
        '{"partitions": [{"topic": "{name}", "partition": 0}]}',
        V2,
        creates=True,
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        f"/api/v1/groups/{GROUP}/offsets/reset",
        '{"to": "earliest", "topics": ["{name}"], "force": true}',
        in_body=True,
    ),
    Route(
        "proxy",
        "POST",
        "/api/v1/security/acls",
        '{"acls": [{"principal": "User:{name}", "resource_type": "TOPIC", "resource_name": "t", '
        '"operation": "READ"}]}',
        creates=True,
        in_body=True,
    ),
    Route(
        "console",
        "POST",
        "/topics",
        "name={form}&partitions=1&replication_factor=1",
        _FORM,
        creates=True,
        in_body=True,
    ),
]

PARTITION_ROUTES = [
    Route("proxy", "GET", f"/topics/{TOPIC}/partitions/{{name}}"),
    Route("proxy", "GET", f"/topics/{TOPIC}/partitions/{{name}}/offsets"),
    Route("proxy", "POST", f"/topics/{TOPIC}/partitions/{{name}}", _V2_RECORDS, V2_JSON),
    Route("proxy", "GET", f"/api/v1/topics/{TOPIC}/partitions/{{name}}/records"),
    Route("proxy", "GET", f"/api/v1/topics/{TOPIC}/partitions/{{name}}/offsets"),
    Route("proxy", "POST", f"/api/v1/topics/{TOPIC}/partitions/{{name}}/batches", _BATCH),
    Route(
        "coordinator",
        "PUT",
        f"/admin/v1/topics/{TOPIC}/partitions/{{name}}/reassignment",
        '{"replicas": [0]}',
    ),
]


class Case(NamedTuple):
    route: Route
    name: str
    target: str
    body: bytes


def _typed_as_is(name: str) -> bool:
    """Whether ``name`` can stand in a request line as typed (printable ASCII, no space)."""
    return (
        bool(name)
        and all(33 <= ord(ch) < 127 for ch in name)
        and "#" not in name
        and "?" not in name
    )


def cases(routes: list[Route], names: list[str]) -> Iterator[Case]:
    for route in routes:
        for name in names:
            if route.in_body:
                if not name and route.empty_is_none:
                    continue
                body = route.body.replace("{name}", _json_name(name)).replace(
                    "{form}", quote(name, safe="")
                )
                yield Case(route, name, route.target, body.encode())
                continue
            if not name:
                continue  # an empty path segment is another route (``/topics``), not a name
            encodings = [quote(name, safe="")]
            if _typed_as_is(name):
                encodings.append(name)
            for encoded in dict.fromkeys(encodings):
                target = route.target.replace("{name}", encoded)
                yield Case(route, name, target, route.body.encode())


class Cluster(NamedTuple):
    running: LocalCluster
    folder: Path
    admin_key: str

    def url(self, service: str) -> str:
        if service == "proxy":
            return self.running.proxy_url(0)
        if service == "secure-proxy":
            return self.running.proxy_url(1)
        if service == "coordinator":
            return self.running.coordinator_url
        return self.running.console_url


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[Cluster]:
    folder: Path = tmp_path_factory.mktemp("hostile")
    cluster_id = f"hostile-{uuid.uuid4().hex[:8]}"
    output = _cli(
        *("users", "create", "admin", "--bootstrap"),
        *("--etcd", etcd.endpoint, "--cluster-id", cluster_id),
    )
    admin_key = output.strip().splitlines()[-1]
    with local_cluster(folder / "cluster", etcd, cluster_id, brokers=1) as running:
        running.start_proxy(0, YAK_MAX_REQUEST_BYTES=str(MAX_BODY))
        # The same routes with security on, as a super-user: the guard sees every name first.
        running.start_proxy(
            1,
            YAK_MAX_REQUEST_BYTES=str(MAX_BODY),
            YAK_SECURITY="on",
            YAK_SUPER_USERS="User:admin",
        )
        running.start_console(0)
        yield Cluster(running, folder, admin_key)


async def _prepare(cluster: Cluster) -> None:
    """The legitimate topic, group, share group (and with it the share state topic) and v2
    instance the routes refer to, and the group state the coordinator writes for it."""
    async with httpx.AsyncClient(base_url=cluster.url("proxy"), timeout=30) as proxy:
        if (await proxy.get(f"/api/v1/topics/{TOPIC}")).status_code == 200:
            return
        await ready_topic(cluster.running, TOPIC)
        produced = await proxy.post(f"/api/v1/topics/{TOPIC}/records", content=_RECORDS)
        assert produced.status_code == 200, produced.text
        instance = await proxy.post(
            f"/consumers/{GROUP}",
            json={"name": INSTANCE},
            headers={"content-type": V2, "accept": V2},
        )
        assert instance.status_code == 200, instance.text
        share_group = await proxy.post("/api/v1/share-groups", json={"name": SHARE_GROUP})
        assert share_group.status_code == 201, share_group.text
    await _group_state_written(cluster)
    await _state_topic_on_disk(cluster)


async def _state_topic_on_disk(cluster: Cluster, timeout_s: float = 30.0) -> None:
    """Until the broker has made and leads every partition of the share state topic (made
    with the first share group; the broker creates its folders in the background)."""
    broker = cluster.folder / "cluster" / "broker-0"
    # Named paths, not a glob: the broker renames folders while it creates them.
    wanted = [broker / f"{SHARE_STATE_TOPIC}-{p}" / "leader-epoch-checkpoint" for p in range(16)]
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in wanted):
        assert time.monotonic() < deadline, f"{SHARE_STATE_TOPIC}: not on disk"
        await asyncio.sleep(0.05)  # another process's files: nothing local to wait on


async def _group_state_written(cluster: Cluster, timeout_s: float = 30.0) -> None:
    """Until the coordinator has written the group's state for the new instance (its own
    background work, after the member appeared), so the sweep's "no new etcd key" does not
    count it: a read, then a watch on the key (nothing polls)."""
    key = Keyspace(cluster.running.cluster_id).group_state(GROUP)
    store = EtcdMetadataStore.from_url(cluster.running.etcd.endpoint)
    try:
        async with asyncio.timeout(timeout_s):
            read = await store.range_prefix(key)
            if read.kvs:
                return
            async with store.watch_prefix(key, read.revision + 1) as watch:
                async for event in watch:
                    if event.value:
                        return
    finally:
        await store.aclose()
    raise AssertionError(f"{key}: the watch ended before the coordinator wrote it")


#: Written by a broker's periodic checkpoint task once a log's offsets moved (the legitimate
#: topic's records, produced by ``_prepare``): background work, whenever its timer fires.
_BACKGROUND_FILES = frozenset({"partition.checkpoint"})


def _tree(folder: Path) -> set[str]:
    """Every path under ``folder`` but the processes' log files and the brokers' periodic
    checkpoints."""
    return {
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if "logs" not in path.relative_to(folder).parts and path.name not in _BACKGROUND_FILES
    }


async def _etcd_keys(cluster: Cluster) -> set[bytes]:
    store = EtcdMetadataStore.from_url(cluster.running.etcd.endpoint)
    try:
        found = await store.range_prefix(f"/yak/{cluster.running.cluster_id}/".encode())
    finally:
        await store.aclose()
    return {kv.key for kv in found.kvs}


def _problem(case: Case, answer: Answer) -> str | None:
    """Why ``answer`` is not an acceptable refusal of ``case`` (None: it is)."""
    status = answer.status
    if not 400 <= status < 500 or status in (401, 403):
        return f"status {status}"
    route_missed = status == 404 and b"Not Found" in answer.body  # ``a/b``: another path
    if case.route.creates and status not in REFUSED and not route_missed:
        return f"status {status} (a creating route must refuse the name)"
    if case.route.service == "console":
        return None  # HTML error pages: the status says it all
    try:
        body = json.loads(answer.body)
    except ValueError:
        return f"not JSON: {answer.body[:80]!r}"
    if "code" in body:
        return None if body["code"] in NATIVE_CODES else f"code {body['code']}"
    if "error_code" in body:
        return None if body["error_code"] in V2_CODES else f"error_code {body['error_code']}"
    return f"no error code: {answer.body[:80]!r}"


async def _sweep(cluster: Cluster, all_cases: list[Case]) -> list[str]:
    problems: list[str] = []
    semaphore = asyncio.Semaphore(8)

    async def one(case: Case) -> None:
        headers = {"content-type": case.route.content_type, "accept": "*/*"}
        if case.route.service == "secure-proxy":
            headers["authorization"] = f"Bearer {cluster.admin_key}"
        base = cluster.url(case.route.service)
        async with semaphore:
            # A server that refuses from the path alone answers without reading the body, and
            # a body sent anyway may reset the connection: send it only when asked to (100).
            expect = bool(case.body)
            method, body = case.route.method, case.body
            answer = await request(base, method, case.target, body, headers, expect_continue=expect)
            if answer.status in (307, 308):  # a trailing slash (``..%2f``): follow it once
                location = answer.headers["location"].removeprefix(base)
                answer = await request(
                    base, method, location, body, headers, expect_continue=expect
                )
        problem = _problem(case, answer)
        if problem is not None:
            shown = case.target if len(case.target) < 120 else case.target[:117] + "..."
            said = answer.body[:160].decode(errors="replace")
            problems.append(
                f"{case.route.service} {case.route.method} {shown} name={case.name[:40]!r}: "
                f"{problem}: {said}"
            )

    await asyncio.gather(*(one(case) for case in all_cases))
    return sorted(problems)


async def test_hostile_names_are_refused_and_nothing_is_written(cluster: Cluster) -> None:
    await _prepare(cluster)
    tree_before = _tree(cluster.folder)
    keys_before = await _etcd_keys(cluster)
    all_cases = [
        *cases(PATH_ROUTES, HOSTILE),
        *cases(BODY_ROUTES, [*HOSTILE, ""]),
        *cases(PARTITION_ROUTES, BAD_PARTITIONS),
    ]
    all_cases += [
        case._replace(route=case.route._replace(service="secure-proxy"))
        for case in all_cases
        if case.route.service == "proxy"
    ]
    problems = await _sweep(cluster, all_cases)
    assert not problems, f"{len(problems)} of {len(all_cases)} answers:\n" + "\n".join(problems)
    new_paths = _tree(cluster.folder) - tree_before
    assert not new_paths, sorted(new_paths)
    new_keys = await _etcd_keys(cluster) - keys_before
    assert not new_keys, sorted(new_keys)
    print(f"\n{len(all_cases)} hostile requests refused; no path and no etcd key written")


async def test_oversized_bodies_answer_413_and_write_nothing(cluster: Cluster) -> None:
    await _prepare(cluster)
    keys_before = await _etcd_keys(cluster)
    # Over YAK_MAX_REQUEST_BYTES (produce) and over the 1 MiB every other JSON body may have.
    big = b'{"records": [{"value": "' + b"x" * (2 << 20) + b'"}], "value_encoding": "string"}'
    for service, method, target, content_type in (
        ("proxy", "POST", f"/api/v1/topics/{TOPIC}/records", "application/json"),
        ("proxy", "POST", f"/topics/{TOPIC}", V2_JSON),
        ("proxy", "POST", "/api/v1/topics", "application/json"),
        ("proxy", "POST", "/api/v1/security/users", "application/json"),
        ("proxy", "POST", f"/consumers/{GROUP}", V2),
        ("proxy", "POST", "/api/v1/share-groups", "application/json"),
    ):
        answer = await request(
            cluster.url(service),
            method,
            target,
            big,
            headers={"content-type": content_type},
            expect_continue=True,
        )
        assert answer.status == 413, (target, answer)
    async with httpx.AsyncClient(base_url=cluster.url("proxy")) as proxy:
        offsets = (await proxy.get(f"/api/v1/topics/{TOPIC}/partitions/0/offsets")).json()
    assert offsets["offset"] == 1  # the one record _prepare wrote
    assert await _etcd_keys(cluster) == keys_before
