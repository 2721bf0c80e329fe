"""ACL bindings and filters: validation, stable ids, the JSON round trip."""

from __future__ import annotations

import pytest

from yak.security import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    user_name,
    user_principal,
)


def binding(**changes: object) -> AclBinding:
    fields: dict[str, object] = {
        "principal": "User:alice",
        "resource_type": ResourceType.TOPIC,
        "resource_name": "orders",
        "operation": Operation.READ,
    }
    fields.update(changes)
    return AclBinding(**fields)  # type: ignore[arg-type]


def test_json_round_trip_and_stable_id() -> None:
    acl = binding(pattern_type=PatternType.PREFIXED, permission=Permission.DENY)
    again = AclBinding.from_json(acl.to_json())
    assert again == acl
    assert again.acl_id == acl.acl_id
    assert binding().acl_id != binding(operation=Operation.WRITE).acl_id


@pytest.mark.parametrize(
    "changes",
    [
        {"principal": "alice"},
        {"principal": "Group:x"},
        {"principal": "User:a/b"},
        {"resource_name": ""},
        {"resource_name": "x" * 250},
        {"resource_name": "*", "pattern_type": PatternType.PREFIXED},
    ],
)
def test_invalid_bindings_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"invalid principal|resource name|PREFIXED"):
        binding(**changes)


def test_user_names() -> None:
    assert user_name(user_principal("alice")) == "alice"
    for bad in ("User:*", "alice", "User:", "User:.."):
        with pytest.raises(ValueError, match="invalid principal"):
            user_name(bad)


def test_filter_fields_compare_exactly() -> None:
    literal = binding()
    prefixed = binding(resource_name="ord", pattern_type=PatternType.PREFIXED)
    assert AclFilter().matches(literal)
    assert AclFilter(resource_name="orders").matches(literal)
    assert not AclFilter(resource_name="orders").matches(prefixed)
    assert AclFilter(principal="User:alice", operation=Operation.READ).matches(prefixed)
    assert not AclFilter(permission=Permission.DENY).matches(literal)
