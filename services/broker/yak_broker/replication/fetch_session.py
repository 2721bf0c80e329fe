"""``FetchSession``: the partitions one follower broker fetches from one leader broker.

Kafka batches all partitions a follower replicates from one leader into one fetch request per
round (a fetch session); so does this. ``build()`` snapshots a round: the epoch queries of the
partitions still truncating and the fetch positions of those fetching, each remembered with the
machine that asked. ``on_epoch_answers`` / ``on_fetch_answers`` apply the answers of that round
to the same machines — an answer for a partition removed or replaced (a new leader epoch) since
the round was built is dropped, so a stale answer never touches a newer machine's log.

Owns only the map partition → current ``FollowerPartition``; the machines own their logs.
Pure and synchronous; the driver (``replica_fetcher``) does the HTTP between ``build`` and the
answers, and may keep one round in flight or several (answers to an older round of the same
machine are harmless: a fetch answer whose position is no longer the log end is ignored).
Crash: nothing persists; a restarted broker builds new sessions and machines. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from yak_broker.replication.follower_partition import FollowerPartition
from yak_broker.replication.messages import EpochAnswer, EpochQuery, FetchAnswer, FetchPosition

__all__ = ["FetchRound", "FetchSession"]

_Key = tuple[str, int]


@dataclass(slots=True)
class FetchRound:
    """One round's requests, each with the machine that made it."""

    queries: dict[_Key, tuple[FollowerPartition, EpochQuery]] = field(default_factory=dict)
    positions: dict[_Key, tuple[FollowerPartition, FetchPosition]] = field(default_factory=dict)

    def epoch_queries(self) -> list[EpochQuery]:
        return [query for _, query in self.queries.values()]

    def fetch_positions(self) -> list[FetchPosition]:
        return [position for _, position in self.positions.values()]

    def __bool__(self) -> bool:
        return bool(self.queries or self.positions)


class FetchSession:
    """See the module doc."""

    def __init__(self) -> None:
        self._partitions: dict[_Key, FollowerPartition] = {}

    def __len__(self) -> int:
        return len(self._partitions)

    def __contains__(self, key: object) -> bool:
        return key in self._partitions

    def add(self, partition: FollowerPartition) -> None:
        """Fetch ``partition`` in this session (replacing the machine of an older epoch)."""
        self._partitions[(partition.topic, partition.partition)] = partition

    def remove(self, topic: str, partition: int) -> None:
        self._partitions.pop((topic, partition), None)

    def build(self) -> FetchRound:
        round_ = FetchRound()
        for key, machine in self._partitions.items():
            request = machine.next_request()
            if isinstance(request, EpochQuery):
                round_.queries[key] = (machine, request)
            elif isinstance(request, FetchPosition):
                round_.positions[key] = (machine, request)
        return round_

    def _current(self, key: _Key, machine: FollowerPartition) -> bool:
        return self._partitions.get(key) is machine

    def on_epoch_answers(self, round_: FetchRound, answers: Iterable[EpochAnswer]) -> None:
        for answer in answers:
            key = (answer.topic, answer.partition)
            asked = round_.queries.get(key)
            if asked is not None and self._current(key, asked[0]):
                asked[0].on_epoch_answer(answer)

    def on_fetch_answers(self, round_: FetchRound, answers: Iterable[FetchAnswer]) -> int:
        """Apply a fetch response; the record bytes appended in all."""
        appended = 0
        for answer in answers:
            key = (answer.topic, answer.partition)
            asked = round_.positions.get(key)
            if asked is not None and self._current(key, asked[0]):
                appended += asked[0].on_fetch_answer(asked[1], answer)
        return appended
