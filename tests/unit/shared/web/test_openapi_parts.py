"""OpenAPI building blocks: name schemas agree with the validators; parameters, errors, links."""

from __future__ import annotations

import base64
import re
from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from yak.api.groups import JoinGroupRequest, OffsetResetRequest
from yak.api.records import Encoding, encode_data
from yak.api.share_records import AckEntry
from yak.errors import InvalidGroupIdError, InvalidRequestError, InvalidTopicError
from yak.metadata.keyspace import validate_member_id
from yak.names import validate_group_id, validate_topic_name
from yak.security.acl import user_name
from yak.web.health import health_router
from yak.web.openapi import (
    BASE64_PATTERN,
    add_link,
    constrain_bodies,
    constrain_parameters,
    constrain_properties,
    error_responses,
    integer_text_pattern,
    link_family,
    name_schema,
    principal_schema,
    readiness_answers,
    request_property_schema,
    user_topic_schema,
)

_NAME = jsonschema.Draft202012Validator(name_schema("Topic"))
_PRINCIPAL = jsonschema.Draft202012Validator(principal_schema())
_NAMES = st.one_of(
    st.text(alphabet="abcXYZ019._-", max_size=260),
    st.text(max_size=12),
    st.sampled_from([".", "..", "...", "a\n", "", "x" * 249, "x" * 250]),
)


def _server_accepts_topic(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


@given(_NAMES)
@example("a\n")
def test_the_name_schema_accepts_exactly_the_topic_names_the_server_accepts(name: str) -> None:
    assert _NAME.is_valid(name) == _server_accepts_topic(name)


@given(_NAMES)
def test_group_and_member_ids_follow_the_same_rule(name: str) -> None:
    expected = _NAME.is_valid(name)
    try:
        validate_group_id(name)
        group_ok = True
    except InvalidGroupIdError:
        group_ok = False
    try:
        validate_member_id(name)
        member_ok = True
    except ValueError:
        member_ok = False
    assert group_ok == member_ok == expected


@given(_NAMES.map(lambda name: f"User:{name}") | _NAMES)
def test_the_principal_schema_accepts_exactly_the_principals_the_server_accepts(
    principal: str,
) -> None:
    try:
        user_name(principal)
        accepted = True
    except ValueError:
        accepted = False
    assert _PRINCIPAL.is_valid(principal) == accepted


def _document() -> dict[str, Any]:
    def operation(*parameters: dict[str, Any]) -> dict[str, Any]:
        return {"parameters": list(parameters), "responses": {"200": {"description": "ok"}}}

    topic = {"name": "topic", "in": "path", "schema": {"type": "string", "description": "d"}}
    listed = {
        "name": "topic",
        "in": "query",
        "schema": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
    }
    return {
        "paths": {
            "/topics": {"post": operation(), "get": operation(listed)},
            "/topics/{topic}": {"get": operation(topic), "delete": operation(topic)},
            "/topics/{topic}/partitions/{partition}": {"get": operation(topic)},
            "/groups/{group}": {"get": operation()},
        }
    }


def _topic_rule(_path: str, _method: str, _where: str, name: str) -> dict[str, Any] | None:
    return name_schema("Topic") if name == "topic" else None


def test_constrained_parameters_keep_description_null_and_list() -> None:
    document = _document()
    constrain_parameters(document, _topic_rule)

    path_parameter = document["paths"]["/topics/{topic}"]["get"]["parameters"][0]
    assert path_parameter["schema"] == {**name_schema("Topic"), "description": "d"}
    listed = document["paths"]["/topics"]["get"]["parameters"][0]["schema"]
    assert listed == {"anyOf": [{"type": "array", "items": name_schema("Topic")}, {"type": "null"}]}


def test_a_constrained_list_keeps_its_bounds() -> None:
    bounded = {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True}
    document: dict[str, Any] = {
        "paths": {},
        "components": {"schemas": {"Reset": {"properties": {"topics": {"anyOf": [bounded]}}}}},
    }
    document["paths"]["/r"] = {
        "post": {"requestBody": {"content": {"a/b": {"schema": {"$ref": _REF_RESET}}}}}
    }
    constrain_properties(document, lambda _c, p: name_schema("Topic") if p == "topics" else None)

    topics = document["components"]["schemas"]["Reset"]["properties"]["topics"]
    assert topics == {
        "type": "array",
        "items": name_schema("Topic"),
        "minItems": 1,
        "uniqueItems": True,
    }


_REF_RESET = "#/components/schemas/Reset"


def test_error_responses_declare_their_headers() -> None:
    answers = error_responses(["404", "405", "429"], "#/components/schemas/Error")

    assert answers["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    assert "headers" not in answers["404"]
    assert set(answers["405"]["headers"]) == {"Allow"}
    assert {"Retry-After", "RateLimit-Limit", "RateLimit-Remaining"} <= set(
        answers["429"]["headers"]
    )


def test_a_family_link_reaches_every_operation_below_the_prefix_with_its_parameters() -> None:
    document = _document()
    link_family(
        document,
        ("/topics", "post", "200"),
        "/topics/{topic}",
        {"path.topic": "$response.body#/name", "path.group": "$request.path.group"},
    )

    links = document["paths"]["/topics"]["post"]["responses"]["200"]["links"]
    assert sorted(links) == [
        "DELETE /topics/{topic}",
        "GET /topics/{topic}",
        "GET /topics/{topic}/partitions/{partition}",
    ]
    assert links["GET /topics/{topic}"] == {
        "operationRef": "#/paths/~1topics~1{topic}/get",
        "parameters": {"path.topic": "$response.body#/name"},
    }


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (("/nowhere", "post", "200"), ("/topics/{topic}", "get")),
        (("/topics", "post", "201"), ("/topics/{topic}", "get")),
        (("/topics", "post", "200"), ("/topics/{topic}", "patch")),
    ],
)
def test_a_link_between_absent_operations_or_answers_is_skipped(
    source: tuple[str, str, str], target: tuple[str, str]
) -> None:
    document = _document()
    add_link(document, source, "l", target, {})

    assert "links" not in document["paths"]["/topics"]["post"]["responses"]["200"]


def test_request_properties_are_constrained_and_answers_left_alone() -> None:
    topic_list = {"type": "array", "items": {"$ref": "#/components/schemas/TopicSummary"}}
    document: dict[str, Any] = {
        "paths": {
            "/topics": {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/CreateTopicRequest"}
                            }
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
        "components": {
            "schemas": {
                "CreateTopicRequest": {
                    "properties": {
                        "name": {"type": "string", "title": "Name"},
                        "partitions": {"type": "integer", "default": 1},
                        "configs": {"type": "object"},
                    }
                },
                "TopicList": {"properties": {"topics": topic_list}},
            }
        },
    }
    constrain_properties(document, request_property_schema)

    schemas = document["components"]["schemas"]
    made = schemas["CreateTopicRequest"]["properties"]
    assert made["name"] == {**user_topic_schema(), "title": "Name"}
    assert made["partitions"] == {"type": "integer", "minimum": 1, "maximum": 10_000, "default": 1}
    assert "retention.ms" in made["configs"]["propertyNames"]["enum"]
    assert schemas["TopicList"]["properties"]["topics"] == topic_list


@pytest.mark.parametrize(
    ("name", "valid"),
    [("orders", True), ("__yak_share_state", False), ("_yak", True), ("..", False)],
)
def test_a_user_topic_is_a_name_outside_the_internal_prefix(name: str, valid: bool) -> None:
    assert jsonschema.Draft202012Validator(user_topic_schema()).is_valid(name) == valid


_ACK = {"type": "accept"}


def _rule_schema(name: str) -> dict[str, Any]:
    document: dict[str, Any] = {"components": {"schemas": {name: {"type": "object"}}}}
    constrain_bodies(document)
    return dict(document["components"]["schemas"][name])


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (JoinGroupRequest, {"topics": ["t"]}),
        (JoinGroupRequest, {"topic_pattern": "t.*"}),
        (JoinGroupRequest, {"topics": [], "topic_pattern": "t.*"}),
        (JoinGroupRequest, {}),
        (JoinGroupRequest, {"topics": ["t"], "topic_pattern": "t.*"}),
        (JoinGroupRequest, {"topics": [], "topic_pattern": None}),
        (
            OffsetResetRequest,
            {"to": "explicit", "offsets": [{"topic": "t", "partition": 0, "offset": 1}]},
        ),
        (OffsetResetRequest, {"to": "latest"}),
        (OffsetResetRequest, {"to": "explicit"}),
        (OffsetResetRequest, {"to": "latest", "offsets": []}),
        (OffsetResetRequest, {"to": "explicit", "offsets": [], "topics": ["t"]}),
        (OffsetResetRequest, {"to": "offset", "offset": 3}),
        (OffsetResetRequest, {"to": "offset"}),
        (OffsetResetRequest, {"to": "offset", "offset": None}),
        (OffsetResetRequest, {"to": "timestamp", "timestamp": 0}),
        (OffsetResetRequest, {"to": "timestamp", "offset": 3}),
        (OffsetResetRequest, {"to": "earliest", "timestamp": 3, "topics": ["t"]}),
        (AckEntry, {"topic": "t", "partition": 0, "offset": 1, **_ACK}),
        (AckEntry, {"topic": "t", "partition": 0, "first_offset": 1, "last_offset": 2, **_ACK}),
        (AckEntry, {"topic": "t", "partition": 0, "offset": 1, "last_offset": 2, **_ACK}),
        (AckEntry, {"topic": "t", "partition": 0, **_ACK}),
    ],
)
def test_the_body_rules_accept_what_the_models_accept(
    model: type[BaseModel], body: dict[str, Any]
) -> None:
    """Only the rule between fields is compared: each body is otherwise valid."""
    try:
        model.model_validate(body)
        accepted = True
    except ValidationError:
        accepted = False
    rule = jsonschema.Draft202012Validator(_rule_schema(model.__name__))
    assert rule.is_valid(body) == accepted


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        ({"offset": 3}, True),
        ({"to": "earliest", "offset": None}, True),
        ({"timestamp": 5}, True),
        ({}, False),
        ({"offset": 3, "timestamp": 5}, False),
    ],
)
def test_a_seek_position_names_exactly_one_target(body: dict[str, Any], valid: bool) -> None:
    """The route's rule (``group_routes.seek``), which the model leaves to it."""
    rule = jsonschema.Draft202012Validator(_rule_schema("SeekPosition"))
    assert rule.is_valid({"topic": "t", "partition": 0, **body}) == valid


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@given(st.text(alphabet="AB+/=\n -", max_size=10) | st.binary(max_size=8).map(_b64))
@example("AB==")
@example("AAAA\n")
def test_the_base64_pattern_is_what_the_decoder_takes(text: str) -> None:
    try:
        encode_data(text, Encoding.BASE64, "value")
        taken = True
    except InvalidRequestError:
        taken = False
    assert bool(re.search(BASE64_PATTERN, text)) == taken


@given(st.integers(-1, 10**9), st.integers(0, 10**9), st.integers(-10, 10**9 + 10))
@example(-1, 0, -1)
@example(1_000, 86_400_000, 86_400_001)
def test_an_integer_text_pattern_takes_the_numbers_of_its_range(
    low: int, high: int, number: int
) -> None:
    pattern = integer_text_pattern(low, high)
    assert bool(re.search(pattern, str(number))) == (low <= number <= high)
    assert not re.search(pattern, f"{number}\n")


@pytest.mark.parametrize(("reason", "status"), [(None, 200), ("etcd unreachable", 503)])
async def test_the_readiness_answers_are_what_readyz_sends(reason: str | None, status: int) -> None:
    async def ready() -> str | None:
        return reason

    app = FastAPI()
    app.include_router(health_router("svc", ready))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
        answer = await client.get("/readyz")
    assert answer.status_code == status
    declared = readiness_answers()[str(status)]["content"]["application/json"]["schema"]
    jsonschema.validate(answer.json(), declared)
