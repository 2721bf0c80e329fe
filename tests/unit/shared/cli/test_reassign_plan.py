"""Reassignment plans: Kafka's JSON format, generation with few moves, verification."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from yak.cli.reassign_plan import (
    PlanEntry,
    format_plan,
    generate_plan,
    parse_plan,
    plan_document,
    plan_status,
)


def test_a_plan_round_trips_through_kafkas_format() -> None:
    entries = [PlanEntry("b", 0, (2, 1)), PlanEntry("a", 1, (1, 2, 3))]
    document = plan_document(entries)
    assert document["partitions"][0] == {
        "topic": "a",
        "partition": 1,
        "replicas": [1, 2, 3],
        "log_dirs": ["any", "any", "any"],
    }
    assert parse_plan(document) == sorted(entries)
    text = format_plan(entries)
    assert text.splitlines()[1] == (
        '{"topic":"a","partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]},'
    )
    assert parse_plan(json.loads(text)) == sorted(entries)
    # Kafka's files may omit log_dirs and version.
    assert parse_plan({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}) == [
        PlanEntry("t", 0, (1,))
    ]


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([], "JSON object"),
        ({"version": 2, "partitions": []}, "version"),
        ({"version": 1}, "partitions"),
        ({"partitions": [{"topic": "", "partition": 0, "replicas": [1]}]}, "topic"),
        ({"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}, "partition"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}, "replicas"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "repeat"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [True]}]}, "replicas"),
        (
            {"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]},
            "log_dirs",
        ),
        (
            {
                "partitions": [
                    {"topic": "t", "partition": 0, "replicas": [1]},
                    {"topic": "t", "partition": 0, "replicas": [2]},
                ]
            },
            "twice",
        ),
    ],
)
def test_malformed_plans_are_refused_precisely(document: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_plan(document)


def test_moving_off_a_broker_replaces_only_its_replicas() -> None:
    current = [PlanEntry("t", 0, (0, 1)), PlanEntry("t", 1, (1, 0))]
    plan = generate_plan(current, {1: None, 2: None})
    # 0 is replaced by 2; 1 keeps leading t-1, and 2 takes t-0's leadership.
    assert plan == [PlanEntry("t", 0, (2, 1)), PlanEntry("t", 1, (1, 2))]


def test_partitions_already_in_place_are_not_in_the_plan() -> None:
    current = [PlanEntry("t", 0, (1, 2)), PlanEntry("t", 1, (2, 1))]
    assert generate_plan(current, {1: None, 2: None}) == []


def test_adding_a_broker_moves_just_enough_to_balance_replicas_and_leaders() -> None:
    current = [PlanEntry("t", p, ((0, 1, 2)[p % 3], (0, 1, 2)[(p + 1) % 3])) for p in range(12)]
    plan = generate_plan(current, dict.fromkeys((0, 1, 2, 3)))
    after = {(e.topic, e.partition): e.replicas for e in current}
    after.update({(e.topic, e.partition): e.replicas for e in plan})
    load = Counter(r for replicas in after.values() for r in replicas)
    leaders = Counter(replicas[0] for replicas in after.values())
    assert sorted(load.values()) == [6, 6, 6, 6]
    assert sorted(leaders.values()) == [3, 3, 3, 3]
    moved = sum(len(set(after[k]) - set(e.replicas)) for k, e in ((e[:2], e) for e in current))
    assert moved == 6  # the new broker's fair share, nothing more
    for replicas in after.values():
        assert len(set(replicas)) == 2


def test_new_replicas_spread_over_racks() -> None:
    current = [PlanEntry("t", 0, (1, 9))]  # broker 9 leaves
    racks = {1: "a", 2: "a", 3: "b"}
    (entry,) = generate_plan(current, racks)
    assert entry.replicas == (1, 3)  # 2 and 3 hold nothing; 3's rack is not used yet


def test_a_kept_replica_crowding_a_rack_moves_when_another_rack_is_free() -> None:
    current = [PlanEntry("t", 0, (1, 2))]  # both in rack a
    (entry,) = generate_plan(current, {1: "a", 2: "a", 3: "b"})
    assert entry.replicas == (1, 3)


def test_more_replicas_than_brokers_is_refused() -> None:
    with pytest.raises(ValueError, match="only 2 brokers"):
        generate_plan([PlanEntry("t", 0, (1, 2, 3))], {1: None, 2: None})
    with pytest.raises(ValueError, match="empty"):
        generate_plan([PlanEntry("t", 0, (1,))], {})


def test_plan_status() -> None:
    entry = PlanEntry("t", 0, (1, 2))
    assert plan_status(entry, [1, 2], [], []) == "complete"
    assert plan_status(entry, [2, 1], [], []) == "not started"  # order is the plan too
    assert plan_status(entry, [1, 2, 0], [2], [0]) == "in progress"
    assert plan_status(entry, [1, 3, 0], [3], [0]) == "not started"  # another move runs
