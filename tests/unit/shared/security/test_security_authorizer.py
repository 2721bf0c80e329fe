"""The authorizer's rules as a matrix: every operation by allowed, denied, deny-wins, prefixed,
wildcard name, ``User:*``, super-user and the implied DESCRIBE / DESCRIBE_CONFIGS."""

from __future__ import annotations

import pytest

from yak.security import (
    ANY_PRINCIPAL,
    IMPLIED_BY,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

ALICE = "User:alice"
BOB = "User:bob"
OPERATIONS = [op for op in Operation if op is not Operation.ALL]
TOPIC = ResourceType.TOPIC


def allow(
    op: Operation,
    name: str = "orders",
    principal: str = ALICE,
    pattern: PatternType = PatternType.LITERAL,
    resource: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(principal, resource, name, op, Permission.ALLOW, pattern)


def deny(op: Operation, name: str = "orders", principal: str = ALICE) -> AclBinding:
    return AclBinding(principal, TOPIC, name, op, Permission.DENY)


@pytest.mark.parametrize("op", OPERATIONS)
def test_no_acl_is_denied(op: Operation) -> None:
    assert not Authorizer().authorize(ALICE, TOPIC, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_a_literal_allow_grants_that_operation_on_that_name_only(op: Operation) -> None:
    authorizer = Authorizer([allow(op)])
    assert authorizer.authorize(ALICE, TOPIC, "orders", op)
    assert not authorizer.authorize(ALICE, TOPIC, "orders2", op)
    assert not authorizer.authorize(BOB, TOPIC, "orders", op)
    assert not authorizer.authorize(ALICE, ResourceType.GROUP, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_an_allow_of_another_operation_does_not_grant(op: Operation) -> None:
    others = [o for o in OPERATIONS if o is not op and o not in IMPLIED_BY.get(op, ())]
    assert not Authorizer([allow(o) for o in others]).authorize(ALICE, TOPIC, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_deny_wins_over_allow_and_all(op: Operation) -> None:
    authorizer = Authorizer([allow(op), allow(Operation.ALL), deny(op)])
    assert not authorizer.authorize(ALICE, TOPIC, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_deny_all_denies_every_operation(op: Operation) -> None:
    authorizer = Authorizer([allow(op), deny(Operation.ALL, name="*")])
    assert not authorizer.authorize(ALICE, TOPIC, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_allow_all_grants_every_operation(op: Operation) -> None:
    assert Authorizer([allow(Operation.ALL)]).authorize(ALICE, TOPIC, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_prefixed_pattern(op: Operation) -> None:
    authorizer = Authorizer([allow(op, "team-a.", pattern=PatternType.PREFIXED)])
    assert authorizer.authorize(ALICE, TOPIC, "team-a.orders", op)
    assert authorizer.authorize(ALICE, TOPIC, "team-a.", op)
    assert not authorizer.authorize(ALICE, TOPIC, "team-b.orders", op)
    assert not authorizer.authorize(ALICE, TOPIC, "team-a", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_literal_star_matches_every_name(op: Operation) -> None:
    authorizer = Authorizer([allow(op, "*")])
    assert authorizer.authorize(ALICE, TOPIC, "anything", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_any_user_principal(op: Operation) -> None:
    authorizer = Authorizer([allow(op, principal=ANY_PRINCIPAL), deny(op, principal=BOB)])
    assert authorizer.authorize(ALICE, TOPIC, "orders", op)
    assert not authorizer.authorize(BOB, TOPIC, "orders", op)


@pytest.mark.parametrize("op", OPERATIONS)
def test_super_user_bypasses_even_deny(op: Operation) -> None:
    authorizer = Authorizer([deny(Operation.ALL, "*", principal=ANY_PRINCIPAL)], ["User:admin"])
    assert authorizer.authorize("User:admin", TOPIC, "orders", op)
    assert not authorizer.authorize(ALICE, TOPIC, "orders", op)


@pytest.mark.parametrize(
    ("granted", "implied"),
    [
        (Operation.READ, Operation.DESCRIBE),
        (Operation.WRITE, Operation.DESCRIBE),
        (Operation.DELETE, Operation.DESCRIBE),
        (Operation.ALTER, Operation.DESCRIBE),
        (Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS),
    ],
)
def test_implied_operations(granted: Operation, implied: Operation) -> None:
    assert Authorizer([allow(granted)]).authorize(ALICE, TOPIC, "orders", implied)
    # ... but an explicit DENY of the implied operation still wins,
    assert not Authorizer([allow(granted), deny(implied)]).authorize(
        ALICE, TOPIC, "orders", implied
    )
    # and the implication does not run backwards.
    assert not Authorizer([allow(implied)]).authorize(ALICE, TOPIC, "orders", granted)


def test_create_and_describe_configs_imply_nothing_else() -> None:
    authorizer = Authorizer([allow(Operation.CREATE), allow(Operation.DESCRIBE_CONFIGS)])
    assert not authorizer.authorize(ALICE, TOPIC, "orders", Operation.DESCRIBE)
    assert not authorizer.authorize(ALICE, TOPIC, "orders", Operation.ALTER_CONFIGS)


def test_filter_keeps_order_and_allowed_names() -> None:
    authorizer = Authorizer([allow(Operation.READ, "a", pattern=PatternType.PREFIXED)])
    names = ["b1", "a2", "c", "a1"]
    assert authorizer.filter(ALICE, TOPIC, names, Operation.DESCRIBE) == ["a2", "a1"]


def test_cluster_and_group_resources_are_separate() -> None:
    authorizer = Authorizer(
        [
            allow(Operation.ALTER, "yak-cluster", resource=ResourceType.CLUSTER),
            allow(Operation.READ, "g", resource=ResourceType.GROUP),
        ]
    )
    assert authorizer.authorize(ALICE, ResourceType.CLUSTER, "yak-cluster", Operation.ALTER)
    assert authorizer.authorize(ALICE, ResourceType.GROUP, "g", Operation.READ)
    assert not authorizer.authorize(ALICE, TOPIC, "g", Operation.READ)
