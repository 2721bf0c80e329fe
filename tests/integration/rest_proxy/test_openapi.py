"""The proxy's OpenAPI document against a real cluster.

* ``/openapi.json`` lists every HTTP route of the app (taken from ``create_app``'s routes, not
  from a list kept here) with its methods, and every ``$ref`` in it resolves.
* As a new user would, schemathesis's CLI with every check and every phase (stateful included,
  following the documents' links) on the three documents of the cluster: the proxy's, the
  coordinator's and a schema registry's started on the same etcd
  (``openapi_contract.run_contracts``; ``make contract`` runs it alone,
  ``YAK_CONTRACT_EXAMPLES`` raises its examples per operation). A check that cannot hold for
  an operation is waived for it alone, with its reason (``WAIVERS``, docs/rest-api.md).
* A bounded schemathesis run from the proxy's document: each operation gets ``MAX_EXAMPLES``
  generated requests, valid and invalid ones, derandomized so that a run repeats exactly. Path
  parameters are half the time objects that exist (a topic, a v2 consumer instance with an
  assignment, a native group member), so requests reach real state and not only 404s; offsets
  and timestamps are now and then the edges of int64, the width they have on the wire, while
  JSON's integers have none. The run checks that nothing answers 5xx (or fails to answer)
  and that answers match the document (status codes, content types, bodies, invalid requests
  refused). Operations that delete run last, so that the objects are there for the others.

The schemathesis pytest plugin (``from_fixture``) is not used: with pytest 9.2 it fails on
``Function._nodeid``; operations are driven through ``as_strategy`` instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest
import requests
import schemathesis
from fastapi.routing import iter_route_contexts
from hypothesis import HealthCheck, Phase
from schemathesis import APIOperation, BaseSchema, CheckFunction, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import V2, create_topic, unique
from tests.integration.rest_proxy.openapi_contract import Waiver, run_contracts
from yak.etcd_server import free_ports
from yak.supervisor import ProcessSpec
from yak_rest_proxy.app import create_app
from yak_rest_proxy.settings import ProxySettings

pytestmark = pytest.mark.integration

PARTITIONS = 3
MAX_EXAMPLES = int(os.environ.get("YAK_FUZZ_EXAMPLES", "25"))
#: How often a path or body parameter names an object that exists.
EXISTING = 0.5
#: How often an offset or timestamp (or an integer parameter) is one of ``INT64_EDGES``.
EDGES = 0.2
#: Longest wait for an answer (s): produce and metadata answer in milliseconds here.
REQUEST_SECONDS = 5
#: A long-poll wait in a generated request is one of these (ms), so that the run stays fast.
WAITS = [0, 1, 50]
#: Offsets and timestamps are int64 on the wire.
INT64_EDGES = [2**63 - 1, 2**63, 2**64]
#: Partition counts a generated admin request may ask for: the cluster is shared by the whole
#: module, and a topic of thousands of partitions starves its brokers of their lease renewals.
PARTITION_COUNTS = [1, 2, 4, 6]
#: An SSE stream of a real member never ends; schemathesis keeps what came in this long (s).
STREAM_SECONDS = 0.5
STREAM_PATH = "/api/v1/groups/{group}/members/{member}/stream"
#: Operations whatever their parameters and responses (schemathesis types them by spec).
Operation = APIOperation[Any, Any, Any, Any]
_HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}

FUZZ_SETTINGS = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    # No shrinking: each step would be one more request to the cluster; the first failing
    # request is reported as it was sent.
    phases=[Phase.explicit, Phase.generate],
    # Building a request from a large schema can be slow or filter a lot; that is not a finding.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=False,
)


@dataclass(frozen=True)
class Targets:
    """Objects that exist on the cluster, for generated requests to find."""

    topic: str
    group: str
    instance: str
    native_group: str
    member: str


@pytest.fixture
async def targets(cluster: LocalCluster) -> Targets:
    """A topic, a v2 consumer instance assigned all of it and a native member subscribed to it.

    Nothing is produced here: the proxy's producer is what a failed run may have left broken,
    and the generated produce requests (which come first) write records enough.
    """
    made = Targets(
        topic=unique("openapi"),
        group=unique("openapi-v2"),
        instance="fuzz-instance",
        native_group=unique("openapi-native"),
        member="fuzz-member",
    )
    await create_topic(cluster, made.topic, partitions=PARTITIONS)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as proxy:
        created = await proxy.post(
            f"/consumers/{made.group}",
            json={
                "name": made.instance,
                "format": "json",
                "auto.offset.reset": "earliest",
                "consumer.request.timeout.ms": 100,
                "consumer.instance.timeout.ms": 600_000,
            },
            headers={"content-type": V2},
        )
        assert created.status_code == 200, created.text
        assigned = await proxy.post(
            f"/consumers/{made.group}/instances/{made.instance}/assignments",
            json={"partitions": [{"topic": made.topic, "partition": p} for p in range(PARTITIONS)]},
            headers={"content-type": V2},
        )
        assert assigned.status_code == 204, assigned.text
        joined = await proxy.post(
            f"/api/v1/groups/{made.native_group}/members",
            json={
                "member_id": made.member,
                "topics": [made.topic],
                "session_timeout_ms": 600_000,
                "auto_offset_reset": "earliest",
            },
        )
        assert joined.status_code == 201, joined.text
    return made


# ---------------------------------------------------------------------------------------------
# The document covers the app


def _app_operations() -> set[tuple[str, str]]:
    """(path, method) of every HTTP route of the proxy app that is meant to be documented."""
    app = create_app(ProxySettings())
    operations: set[tuple[str, str]] = set()
    for route in iter_route_contexts(app.routes):
        if not getattr(route.original_route, "include_in_schema", True):
            continue  # /openapi.json and the docs pages themselves
        if route.methods is None:
            continue  # a WebSocket: OpenAPI has no operation for one
        path = route.path_format or route.path
        assert path is not None, route
        operations.update((path, method.lower()) for method in route.methods)
    return operations


def _document_operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in document["paths"].items()
        for method in item
        if method in _HTTP_METHODS
    }


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _resolves(document: dict[str, Any], ref: str) -> bool:
    """Whether a local JSON pointer (``#/components/schemas/X``) names something."""
    if not ref.startswith("#/"):
        return False
    node: object = document
    for part in ref[2:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


async def test_document_lists_every_route_and_every_ref_resolves(cluster: LocalCluster) -> None:
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as proxy:
        answer = await proxy.get("/openapi.json")
    assert answer.status_code == 200, answer.text
    document = answer.json()

    routes = _app_operations()
    assert len(routes) > 20, sorted(routes)
    assert sorted(routes - _document_operations(document)) == []
    refs = set(_refs(document))
    assert refs
    assert sorted(ref for ref in refs if not _resolves(document, ref)) == []


# ---------------------------------------------------------------------------------------------
# schemathesis run --checks all, every phase, on each document of the cluster

#: Checks that cannot hold for an operation whatever the document says, and why.
WAIVERS = (
    Waiver(
        "GET /consumers/{group}/instances/{instance}/subscription",
        "use_after_free",
        "Confluent's v2 API: DELETE …/subscription unsubscribes, and the subscription then "
        'reads as {"topics": []} (200), not 404 — what its clients expect (found at 40 examples)',
    ),
    Waiver(
        "PUT /admin/v1/brokers/{broker_id}/decommission",
        "positive_data_acceptance",
        "draining a broker needs other live brokers to take its replicas: a cluster state "
        "no request schema can state (400 INVALID_REPLICATION_FACTOR)",
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "a partition count can only grow: the topic's current count is state "
            "(400 INVALID_PARTITIONS)",
        )
        for operation in (
            "POST /admin/v1/topics/{name}/partitions",
            "POST /api/v1/topics/{topic}/partitions",
        )
    ),
    Waiver(
        "POST /v3/clusters/{cluster_id}/topics",
        "positive_data_acceptance",
        "creating a topic that exists is Confluent's 400 40002, which v3 clients expect: the "
        "cluster's state",
    ),
    Waiver(
        "GET /topics/{topic}/partitions/{partition}/offsets",
        "positive_data_acceptance",
        "a partition created a moment ago answers 421 (retriable) until its leader holds it: "
        "the cluster's state",
    ),
    Waiver(
        "PUT /admin/v1/topics/{name}/partitions/{partition}/reassignment",
        "positive_data_acceptance",
        "the replicas must name live brokers: cluster state (400 INVALID_REPLICA_ASSIGNMENT)",
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "scheduled records and delays need the topic's delayed.delivery.enable: the "
            "topic's config, not the request (400 DELAYS_NOT_ENABLED)",
        )
        for operation in (
            "GET /api/v1/topics/{topic}/partitions/{partition}/scheduled",
            "DELETE /api/v1/topics/{topic}/partitions/{partition}/scheduled/{offset}",
            "POST /api/v1/topics/{topic}/records",
            "POST /api/v1/topics/{topic}/partitions/{partition}/batches",
        )
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "an offset past the log end is the log's state (416 OFFSET_OUT_OF_RANGE); a "
            "filter is an expression of docs/filters.md's grammar, which no JSON Schema "
            "states (400 INVALID_FILTER)",
        )
        for operation in (
            "GET /api/v1/topics/{topic}/partitions/{partition}/records",
            "GET /api/v1/groups/{group}/members/{member}/records",
            f"GET {STREAM_PATH}",
            "GET /api/v1/share-groups/{group}/stream",
            "POST /api/v1/share-groups/{group}/acquire",
            "GET /consumers/{group}/instances/{instance}/records",
        )
    ),
    Waiver(
        "POST /consumers/{group}/instances/{instance}/assignments",
        "ensure_resource_availability",
        "a 404 (40402) there names a topic-partition of the body that does not exist: cluster "
        "state, not the instance the stateful run created just before",
    ),
    Waiver(
        "POST /api/v1/groups/{group}/offsets/reset",
        "positive_data_acceptance",
        "explicit offsets name each partition once: uniqueness by a key of the items, which "
        "JSON Schema cannot state (uniqueItems compares whole items) (400 INVALID_REQUEST)",
    ),
    Waiver(
        "POST /api/v1/share-groups/{group}/acknowledgements",
        "positive_data_acceptance",
        "an acknowledged range runs from first_offset up to last_offset: first <= last "
        "compares two values of the request, which JSON Schema cannot state (it has no "
        "$data); an inverted range is 400 INVALID_REQUEST, as Kafka's ShareAcknowledge "
        "answers one",
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "an Idempotency-Key sent again with another request is refused by design "
            "(422 IDEMPOTENCY_KEY_REUSED): the generator reuses keys across requests",
        )
        for operation in ("POST /topics/{topic}", "POST /topics/{topic}/partitions/{partition}")
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "a topic config's value has its own form and range (yak.topic_config: numbers "
            "within bounds, subsets of choices) given as a string: no string schema states a "
            "numeric range (400 INVALID_CONFIG)",
        )
        for operation in (
            "POST /api/v1/topics",
            "PATCH /api/v1/topics/{topic}/configs",
            "POST /v3/clusters/{cluster_id}/topics",
            "PUT /v3/clusters/{cluster_id}/topics/{topic}/configs/{name}",
            "POST /v3/clusters/{cluster_id}/topics/{topic}/configs:alter",
            "POST /admin/v1/topics",
            "PATCH /admin/v1/topics/{name}/configs",
        )
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "a schema's text must parse as an Avro, JSON Schema or Protobuf schema of its "
            "schemaType: a grammar no JSON Schema states (422 42201, Confluent's)",
        )
        for operation in (
            "POST /subjects/{subject}",
            "POST /subjects/{subject}/versions",
            "POST /compatibility/subjects/{subject}/versions",
            "POST /compatibility/subjects/{subject}/versions/{version}",
        )
    ),
    *(
        Waiver(
            operation,
            "positive_data_acceptance",
            "a subject another request put in READONLY mode refuses changes: the subject's "
            "state (422 42205, Confluent's)",
        )
        for operation in (
            "DELETE /subjects/{subject}",
            "DELETE /subjects/{subject}/versions/{version}",
        )
    ),
)


@pytest.fixture(scope="module")
def registry_url(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A schema registry on the cluster's etcd (stopped with the cluster's supervisor)."""
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    script = str(Path(sys.executable).with_name("yak-schema-registry"))
    log = tmp_path_factory.mktemp("registry") / "registry.log"
    argv = (
        script,
        "--port",
        str(port),
        "--etcd",
        cluster.etcd.endpoint,
        "--cluster-id",
        unique("sr"),
    )
    cluster.supervisor.start(
        ProcessSpec(name="schema-registry", argv=argv, log_path=log, health_url=f"{url}/readyz")
    )
    return url


@pytest.mark.timeout(900)
def test_every_document_holds_under_every_check(
    cluster: LocalCluster, registry_url: str, tmp_path: Path
) -> None:
    """Before the bounded runs below: those make topics with names of up to 249 characters,
    which the brokers cannot host yet (a log's staging folder ``<topic>-<p>.<id>-create``
    passes the 255-byte file-name limit from 210 characters on, so the partitions answer 421
    for good), and this run would meet them by name."""
    documents = {
        "rest-proxy": cluster.proxy_url(0),
        "coordinator": cluster.coordinator_url,
        "schema-registry": registry_url,
    }
    runs = run_contracts(
        {k: f"{url}/openapi.json" for k, url in documents.items()}, tmp_path, WAIVERS
    )
    failed = {name: run for name, run in runs.items() if run.returncode != 0}
    assert not failed, "\n\n".join(f"### {name}\n{run.summary()}" for name, run in failed.items())


# ---------------------------------------------------------------------------------------------
# Schemathesis against the live proxy


def _load_schema(base_url: str, targets: Targets) -> BaseSchema:
    config = schemathesis.Config.from_dict(
        {
            "base-url": base_url,
            "request-timeout": REQUEST_SECONDS,
            # Nothing secret is sent; sanitizing would print ``key_encoding=[Filtered]`` in the
            # requests to reproduce.
            "output": {"sanitization": {"enabled": False}},
            "dictionaries": {
                "topics": {"values": [targets.topic]},
                "partitions": {"values": list(range(PARTITIONS))},
                "v2-groups": {"values": [targets.group]},
                "native-groups": {"values": [targets.native_group]},
                "instances": {"values": [targets.instance]},
                "members": {"values": [targets.member]},
                "waits": {"values": WAITS},
                "int64-edges": {"values": INT64_EDGES},
                "partition-counts": {"values": PARTITION_COUNTS},
            },
            "generation": {
                "dictionaries": {"integer": {"dictionary": "int64-edges", "probability": EDGES}}
            },
            "parameters": {
                "path.topic": {"dictionary": "topics", "probability": EXISTING},
                "path.partition": {"dictionary": "partitions", "probability": EXISTING},
                "path.instance": {"dictionary": "instances", "probability": EXISTING},
                "path.member": {"dictionary": "members", "probability": EXISTING},
                "query.timeout": {"dictionary": "waits", "probability": 1.0},
                "query.timeout_ms": {"dictionary": "waits", "probability": 1.0},
                "body.topics[*]": {"dictionary": "topics", "probability": EXISTING},
                "body.partitions[*].topic": {"dictionary": "topics", "probability": EXISTING},
                "body.offsets[*].topic": {"dictionary": "topics", "probability": EXISTING},
                "body.records[*].partition": {"dictionary": "partitions", "probability": EXISTING},
                "body.offsets[*].offset": {"dictionary": "int64-edges", "probability": EDGES},
                "body.partitions[*].offset": {"dictionary": "int64-edges", "probability": EDGES},
                "body.partitions[*].timestamp": {"dictionary": "int64-edges", "probability": EDGES},
                "body.records[*].timestamp": {"dictionary": "int64-edges", "probability": EDGES},
            },
            # An operation takes its ``parameters`` from the first entry that matches it, and
            # the keys of one entry select operations by any of them: one key an entry here.
            "operations": [
                {
                    "include-path-regex": "^/consumers/",
                    "parameters": {
                        "path.group": {"dictionary": "v2-groups", "probability": EXISTING}
                    },
                },
                {
                    "include-path-regex": "^/api/v1/groups/",
                    "parameters": {
                        "path.group": {"dictionary": "native-groups", "probability": EXISTING}
                    },
                },
                {
                    "include-name": "POST /api/v1/topics",
                    "parameters": {
                        "body.partitions": {"dictionary": "partition-counts", "probability": 1.0}
                    },
                },
                {
                    "include-name": "POST /api/v1/topics/{topic}/partitions",
                    "parameters": {
                        "body.count": {"dictionary": "partition-counts", "probability": 1.0}
                    },
                },
                {"include-name": f"GET {STREAM_PATH}", "request-timeout": STREAM_SECONDS},
            ],
        }
    )
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config)


def _operations(schema: BaseSchema) -> list[Operation]:
    """Every operation of the document, in its order, those that delete last."""
    operations = [schema[path][method] for path in schema for method in schema[path]]
    return sorted(operations, key=lambda operation: operation.method.upper() == "DELETE")


def _fuzz(operation: Operation, checks: Sequence[CheckFunction], session: requests.Session) -> None:
    """Send generated requests for ``operation``; AssertionError with the first failure."""
    strategy = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(
        GenerationMode.NEGATIVE
    )

    @FUZZ_SETTINGS
    @hypothesis.given(case=strategy)
    def send(case: schemathesis.Case[Operation]) -> None:
        try:
            response = case.call(session=session)
        except requests.RequestException as exc:
            curl = case.as_curl_command()
            raise AssertionError(f"no answer ({exc!r}); reproduce with:\n    {curl}") from None
        try:
            case.validate_response(response, checks=list(checks))
        except BaseExceptionGroup as failures:  # schemathesis's FailureGroup
            raise AssertionError(failures.message) from None

    send()


def _run(schema: BaseSchema, checks: Sequence[CheckFunction]) -> dict[str, str]:
    """Failures by operation label (each operation stops at its first failing request)."""
    failures = {}
    with requests.Session() as session:
        for operation in _operations(schema):
            try:
                _fuzz(operation, checks, session)
            except AssertionError as failure:
                failures[operation.label] = str(failure)
    return failures


def _report(failures: dict[str, str]) -> str:
    lines = [f"{len(failures)} operation(s) failed:"]
    for label, text in failures.items():
        lines += ["", f"=== {label}", text.strip()]
    return "\n".join(lines)


def test_generated_requests_get_no_server_error_and_answers_match_the_document(
    cluster: LocalCluster, targets: Targets
) -> None:
    """One run with every check: the generation is derandomized, so two runs (one a check)
    sent the same requests twice."""
    schema = _load_schema(cluster.proxy_url(0), targets)
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        negative_data_rejection,
    ]
    failures = _run(schema, checks)
    assert not failures, _report(failures)
