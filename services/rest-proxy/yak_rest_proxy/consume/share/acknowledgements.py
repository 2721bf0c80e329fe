"""Acknowledgement entries as ShareAcknowledge requests can carry them (pure).

A request's entries (``AckRange``: one partition, an inclusive offset range, one acknowledge
type) are answered one by one, but Kafka's ShareAcknowledge names a partition at most once per
request and answers one error per partition. So entries are planned in *rounds*: round ``i``
holds the ``i``-th entry of every partition, one ``AckBatch`` each, and rounds are sent one
after the other (each round one request per leader). An error then belongs to exactly one
entry, and a failing entry changes nothing of the others (the leader applies batches one by
one and refuses a batch whole). The common request — one range per partition, as the SDK sends
them — is one round.

Pure functions of their arguments; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from yak.protocol.kafka_share import AckBatch, AckType

__all__ = ["AckRange", "RoundEntry", "plan_rounds", "split_riders"]


class AckRange(NamedTuple):
    """Offsets ``first..last`` (inclusive) of one partition, and what the member says of them."""

    topic: str
    partition: int
    first: int
    last: int
    type: AckType

    @property
    def batch(self) -> AckBatch:
        return AckBatch(self.first, self.last, (int(self.type),))


class RoundEntry(NamedTuple):
    """One entry of a round: its position among the request's entries, and the entry."""

    position: int
    entry: AckRange


def plan_rounds(entries: Sequence[AckRange]) -> list[list[RoundEntry]]:
    """The rounds of ``entries`` (see the module docstring): each partition at most once per
    round, entries of one partition in the order given."""
    rounds: list[list[RoundEntry]] = []
    seen: dict[tuple[str, int], int] = {}
    for index, entry in enumerate(entries):
        key = (entry.topic, entry.partition)
        number = seen.get(key, 0)
        seen[key] = number + 1
        if number == len(rounds):
            rounds.append([])
        rounds[number].append(RoundEntry(index, entry))
    return rounds


def split_riders(entries: Sequence[AckRange]) -> tuple[list[RoundEntry], list[RoundEntry]]:
    """(entries to send before the acquire, the last entry of each partition: it rides the
    partition's ShareFetch), each with its position among ``entries``."""
    last: dict[tuple[str, int], int] = {}
    for index, entry in enumerate(entries):
        last[(entry.topic, entry.partition)] = index
    riding = set(last.values())
    before = [RoundEntry(i, e) for i, e in enumerate(entries) if i not in riding]
    riders = [RoundEntry(i, e) for i, e in enumerate(entries) if i in riding]
    return before, riders
