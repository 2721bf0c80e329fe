"""The coordinator's OpenAPI document: names, errors and links as the server has them."""

from __future__ import annotations

from typing import Any

import pytest

from yak.errors import InvalidRequestError
from yak.names import INTERNAL_TOPIC_PREFIX
from yak.web.openapi import name_schema, operations
from yak_coordinator.app import create_app
from yak_coordinator.decisions import share_group_rules
from yak_coordinator.routes import _broker_id


def _document() -> dict[str, Any]:
    return create_app().openapi()


def test_the_internal_prefix_is_the_one_the_rules_refuse() -> None:
    assert INTERNAL_TOPIC_PREFIX == share_group_rules.INTERNAL_TOPIC_PREFIX


def test_every_name_in_a_path_has_the_validators_pattern() -> None:
    for path, method, operation in operations(_document()):
        for parameter in operation.get("parameters", ()):
            if parameter["in"] == "path" and parameter["name"] in ("name", "group_id", "user"):
                schema = parameter["schema"]
                assert schema["pattern"] == name_schema("x")["pattern"], (method, path)
                assert schema["maxLength"] == 249


def test_errors_are_declared_with_the_native_body_and_fastapis_422_is_gone() -> None:
    document = _document()
    answers = document["paths"]["/admin/v1/topics/{name}"]["delete"]["responses"]
    assert {"400", "404", "405", "409", "429", "503"} <= set(answers)
    assert "422" not in answers
    assert answers["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    assert "Retry-After" in answers["429"]["headers"]
    assert "HTTPValidationError" not in document["components"]["schemas"]
    health = document["paths"]["/healthz"]["get"]["responses"]
    assert "401" not in health


def test_a_created_topic_links_to_the_operations_on_it() -> None:
    answer = _document()["paths"]["/admin/v1/topics"]["post"]["responses"]["201"]
    link = answer["links"]["DELETE /admin/v1/topics/{name}"]
    assert link["parameters"] == {"path.name": "$response.body#/name"}


def test_a_changed_topic_may_not_be_internal_and_a_read_one_may() -> None:
    paths = _document()["paths"]
    deleted = paths["/admin/v1/topics/{name}"]["delete"]["parameters"][0]["schema"]
    read = paths["/admin/v1/topics/{name}"]["get"]["parameters"][0]["schema"]
    assert "__yak_" in str(deleted["not"])
    assert "__yak_" not in str(read["not"])


def test_share_group_bounds_are_the_rules_bounds() -> None:
    schemas = _document()["components"]["schemas"]
    created = schemas["CreateShareGroupRequest"]["properties"]
    attempts = created["max_delivery_attempts"]
    lock = created["lock_duration_ms"]
    assert (attempts["minimum"], attempts["maximum"]) == share_group_rules.DELIVERY_ATTEMPTS_RANGE
    assert (lock["minimum"], lock["maximum"]) == share_group_rules.LOCK_DURATION_RANGE_MS


def test_a_broker_id_in_a_path_is_documented_as_the_route_takes_it() -> None:
    found = []
    for path, method, operation in operations(_document()):
        for parameter in operation.get("parameters", ()):
            if parameter["in"] == "path" and parameter["name"] == "broker_id":
                found.append((method, path))
                assert parameter["schema"]["minimum"] == 0
    assert len(found) == 3, found
    with pytest.raises(InvalidRequestError):
        _broker_id(-1)
    assert _broker_id(0) == 0


def test_readyz_declares_its_own_bodies_not_the_error_body() -> None:
    answers = _document()["paths"]["/readyz"]["get"]["responses"]
    for status in ("200", "503"):
        assert answers[status]["content"]["application/json"]["schema"]["title"] == "Readiness"
