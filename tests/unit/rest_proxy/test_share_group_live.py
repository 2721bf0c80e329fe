"""``share_group_live.sum_live_state``: the brokers' answers summed — partitions by topic and
partition (the higher leader epoch, then the loaded one, where two brokers report one),
counters per topic, totals (lag, oldest unacked), brokers that did not answer."""

from __future__ import annotations

from yak.api.share_groups import (
    ShareBrokerError,
    ShareGroupLeaderState,
    SharePartitionState,
    ShareTopicCounters,
)
from yak_rest_proxy.api.native.share_group_live import sum_live_state


def _part(partition: int, leader: int, epoch: int, **figures: object) -> SharePartitionState:
    loaded = bool(figures)
    return SharePartitionState.model_validate(
        dict(
            topic="jobs",
            partition=partition,
            leader_id=leader,
            leader_epoch=epoch,
            loaded=loaded,
            high_watermark=10,
            **figures,
        )
    )


def _answer(
    broker: int, parts: list[SharePartitionState], counters: list[ShareTopicCounters]
) -> ShareGroupLeaderState:
    return ShareGroupLeaderState(broker_id=broker, group="g", partitions=parts, topics=counters)


def test_answers_are_summed_and_the_newer_leader_wins() -> None:
    one = _answer(
        1,
        [
            _part(0, 1, 3, acquired=2, in_flight=5, available=3, lag=8, start_offset=2),
            _part(1, 1, 1, acquired=9, in_flight=9, lag=9, oldest_unacked_timestamp_ms=50),
        ],
        [ShareTopicCounters(topic="jobs", acquired=10, accepted=4, dead_lettered=1)],
    )
    two = _answer(
        2,
        [_part(1, 2, 2), _part(2, 2, 0, acquired=1, lag=1, oldest_unacked_timestamp_ms=70)],
        [ShareTopicCounters(topic="jobs", acquired=3, accepted=2, released=1)],
    )
    down = ShareBrokerError(broker_id=3, error="cannot reach the broker")
    live = sum_live_state([one, two, down])
    assert [(p.partition, p.leader_id, p.loaded) for p in live.partitions] == [
        (0, 1, True),
        (1, 2, False),  # epoch 2 led by broker 2 now, not loaded there yet
        (2, 2, True),
    ]
    (counters,) = live.topics
    assert (counters.acquired, counters.accepted, counters.released) == (13, 6, 1)
    assert counters.dead_lettered == 1
    totals = live.totals
    assert (totals.acquired, totals.in_flight, totals.available) == (3, 5, 3)
    assert (totals.acknowledged, totals.dead_lettered, totals.lag) == (6, 1, 9)
    assert totals.oldest_unacked_timestamp_ms == 70
    assert live.errors == [down]


def test_a_loaded_report_beats_a_not_loaded_one_of_the_same_epoch() -> None:
    live = sum_live_state(
        [_answer(1, [_part(0, 1, 4, acquired=1)], []), _answer(2, [_part(0, 2, 4)], [])]
    )
    ((part,),) = [live.partitions]
    assert (part.leader_id, part.acquired) == (1, 1)
    again = sum_live_state(
        [_answer(2, [_part(0, 2, 4)], []), _answer(1, [_part(0, 1, 4, acquired=1)], [])]
    )
    assert again.partitions == live.partitions


def test_nothing_answered_is_empty() -> None:
    live = sum_live_state([])
    assert (live.partitions, live.topics, live.errors) == ([], [], [])
    assert live.totals.oldest_unacked_timestamp_ms is None
