"""Partition reassignment, the admin half: validation, start, restart and cancel (pure)."""

from __future__ import annotations

import pytest

from yak.errors import InvalidReplicaAssignmentError
from yak.metadata.models import PartitionState
from yak_coordinator.decisions.reassignment import (
    cancel_reassignment,
    start_reassignment,
    validate_target,
)

LIVE = (1, 2, 3, 4)


def state(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(
        topic="t", partition=0, leader=leader, leader_epoch=3, replicas=replicas, isr=isr
    )


@pytest.mark.parametrize(
    ("replicas", "configs", "words"),
    [
        ([], {}, "empty"),
        ([1, 1], {}, "repeat"),
        ([1, 7], {}, "not live: [7]"),
        ([-1], {}, "not live: [-1]"),
        ([1], {"min.insync.replicas": "2"}, "min.insync.replicas=2"),
    ],
)
def test_invalid_targets_are_refused(
    replicas: list[int], configs: dict[str, str], words: str
) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as raised:
        validate_target(replicas, LIVE, configs)
    assert raised.value.code == "INVALID_REPLICA_ASSIGNMENT"
    assert words in raised.value.message


def test_a_valid_target_keeps_its_order() -> None:
    # Kafka lets a reassignment change the replica count: nothing ties it to the old one.
    assert validate_target([3, 1, 4], LIVE, {"min.insync.replicas": "2"}) == (3, 1, 4)


def test_start_adds_followers_outside_the_isr_and_keeps_the_removed_ones() -> None:
    moved = start_reassignment(state(1, (1, 2), (1, 2)), (3, 4))
    assert moved.replicas == (3, 4, 1, 2)
    assert (moved.adding_replicas, moved.removing_replicas) == ((3, 4), (1, 2))
    assert (moved.leader, moved.isr, moved.leader_epoch) == (1, (1, 2), 3)
    assert moved.partition_epoch == 1
    assert moved.target_replicas == (3, 4)
    assert moved.original_replicas == (1, 2)


def test_start_with_an_overlap_adds_and_removes_only_the_difference() -> None:
    moved = start_reassignment(state(2, (1, 2, 3), (1, 2, 3)), (2, 3, 4))
    assert moved.replicas == (2, 3, 4, 1)
    assert (moved.adding_replicas, moved.removing_replicas) == ((4,), (1,))


def test_start_on_the_current_replicas_only_reorders() -> None:
    moved = start_reassignment(state(1, (1, 2), (1, 2)), (2, 1))
    assert moved.replicas == (2, 1)
    assert not moved.reassigning


def test_a_new_target_replaces_a_running_move_from_the_original_replicas() -> None:
    first = start_reassignment(state(1, (1, 2), (1, 2)), (3, 4))
    second = start_reassignment(first.model_copy(update={"isr": (1, 2, 3)}), (2, 3))
    assert second.replicas == (2, 3, 1)
    assert (second.adding_replicas, second.removing_replicas) == ((3,), (1,))
    assert second.isr == (1, 2, 3)  # 4 never joined; 3 did and stays in sync
    assert second.partition_epoch == 2


def test_cancel_restores_the_original_replicas_and_drops_added_ones_from_the_isr() -> None:
    moved = start_reassignment(state(1, (1, 2), (1, 2)), (3, 2))
    caught_up = moved.model_copy(update={"isr": (1, 2, 3)})
    cancelled = cancel_reassignment(caught_up)
    assert cancelled is not None
    # The original set, in the order of the merged list (as Kafka's revert): 2 now comes first.
    assert (cancelled.replicas, cancelled.isr, cancelled.leader) == ((2, 1), (1, 2), 1)
    assert not cancelled.reassigning
    assert cancelled.partition_epoch == caught_up.partition_epoch + 1


def test_cancel_keeps_a_non_empty_isr_when_only_added_replicas_are_in_sync() -> None:
    # The original replicas died; an added one leads. Reconcile replaces that leader next.
    moved = start_reassignment(state(1, (1,), (1,)), (2,))
    only_new = moved.model_copy(update={"leader": 2, "isr": (2,)})
    cancelled = cancel_reassignment(only_new)
    assert cancelled is not None
    assert (cancelled.replicas, cancelled.isr) == ((1,), (2,))


def test_cancel_without_a_move_changes_nothing() -> None:
    assert cancel_reassignment(state(1, (1, 2), (1, 2))) is None
