"""Acknowledgement entries as ShareAcknowledge and ShareFetch requests carry them (pure).

A request's entries (``AckRange``: one partition, an inclusive offset range, one acknowledge
type) are answered one by one. A ShareAcknowledge (or ShareFetch) names a partition once and
carries all its entries there, in the order given, one ``AckBatch`` each (``by_partition``);
the leader applies them in that order, each whole or refused, and answers the partition's first
refusal with the indices of the refused batches (``kafka_share.YAK_ACK_REFUSED_TAG``), so each
entry gets its own result (``entry_results``) from one request per leader, however many ranges
a member acknowledges (delayed records come due out of offset order: their accepts are many
short ranges). A partition-level failure — the leader moved, an unknown share group, a broker
that does not list refused batches — is every one of that partition's entries' result.

Pure functions of their arguments; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from yak.errors import YakError
from yak.protocol.kafka_share import AckBatch, AckType

__all__ = ["AckRange", "RoundEntry", "by_partition", "entry_results"]


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


def by_partition(items: Sequence[RoundEntry]) -> dict[tuple[str, int], list[RoundEntry]]:
    """``items`` grouped by partition, each group in the order given."""
    grouped: dict[tuple[str, int], list[RoundEntry]] = {}
    for item in items:
        grouped.setdefault((item.entry.topic, item.entry.partition), []).append(item)
    return grouped


def entry_results(
    items: Sequence[RoundEntry], error: YakError | None, refused: Sequence[int]
) -> dict[int, YakError | None]:
    """Each of one partition's ``items`` (sent in this order) by its position: the
    partition's ``error`` for the batches listed in ``refused`` — for all of them when the
    answer lists none —, None for the others."""
    if error is None:
        return dict.fromkeys((item.position for item in items), None)
    listed = set(refused)
    return {
        item.position: error if not listed or index in listed else None
        for index, item in enumerate(items)
    }
