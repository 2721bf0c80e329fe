"""What became of every acknowledged record: the chaos suite's verdict, kept pure so it is
unit-tested on planted losses, copies, moves and reorderings.

The producers write values that name them and their sequence (``<producer>:<seq>:...``), so a
value found in a partition says exactly which send it came from. A record is:

- **lost** when it was acknowledged and its value is nowhere in its partition;
- **duplicated** once for every copy beyond the first (acknowledged or not: with idempotent
  producers even a record whose send failed must not be written twice);
- **moved** when it was acknowledged at one offset and its first copy is at another (an
  acknowledgement promises the offset too; Kafka's consumers commit offsets);
- **reordered** when, for one producer and partition, a record sent later sits at a lower
  offset than one sent before it (each pair of neighbours in send order out of place counts
  once).

Records found but never acknowledged (the send failed or timed out, yet the write happened)
are legal and counted apart (``unacked_found``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Ack", "Verdict", "judge"]


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledged record: who sent it, its place in that sender's order, where it went."""

    producer: str
    partition: int
    sequence: int
    offset: int
    value: bytes


@dataclass(slots=True)
class Verdict:
    """The counts of one topic (or of several, added with ``+``)."""

    acked: int = 0
    found: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    moved: int = 0
    unacked_found: int = 0
    #: A few examples of each finding, for the report.
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.lost == self.duplicated == self.reordered == self.moved == 0

    def note(self, kind: str, text: str, keep: int = 5) -> None:
        listed = self.examples.setdefault(kind, [])
        if len(listed) < keep:
            listed.append(text)

    def __add__(self, other: Verdict) -> Verdict:
        total = Verdict(
            acked=self.acked + other.acked,
            found=self.found + other.found,
            lost=self.lost + other.lost,
            duplicated=self.duplicated + other.duplicated,
            reordered=self.reordered + other.reordered,
            moved=self.moved + other.moved,
            unacked_found=self.unacked_found + other.unacked_found,
        )
        for source in (self, other):
            for kind, texts in source.examples.items():
                for text in texts:
                    total.note(kind, text)
        return total

    def counts(self) -> dict[str, int]:
        return {
            "acked": self.acked,
            "found": self.found,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "reordered": self.reordered,
            "moved": self.moved,
            "unacked_found": self.unacked_found,
        }


def judge(
    acks: Iterable[Ack],
    stored: Mapping[int, Sequence[tuple[int, bytes]]],
    sent: Iterable[bytes] = (),
) -> Verdict:
    """The verdict over one topic: ``acks`` are the acknowledged records, ``stored`` maps each
    partition to its records as read back (offset, value), ``sent`` every value ever handed
    to a producer (to tell an unacknowledged write from a stranger; optional)."""
    verdict = Verdict()
    where: dict[tuple[int, bytes], list[int]] = {}
    for partition, records in stored.items():
        for offset, value in records:
            where.setdefault((partition, value), []).append(offset)
            verdict.found += 1
    for (partition, value), offsets in where.items():
        if len(offsets) > 1:
            verdict.duplicated += len(offsets) - 1
            verdict.note("duplicated", f"p{partition} {value[:40]!r} at offsets {offsets[:5]}")
    acked_values: set[tuple[int, bytes]] = set()
    by_sender: dict[tuple[str, int], list[tuple[int, int, bytes]]] = {}
    for ack in acks:
        verdict.acked += 1
        key = (ack.partition, ack.value)
        acked_values.add(key)
        offsets = where.get(key, [])
        if not offsets:
            verdict.lost += 1
            verdict.note("lost", f"p{ack.partition} {ack.value[:40]!r} acked at {ack.offset}")
            continue
        first = min(offsets)
        if first != ack.offset:
            verdict.moved += 1
            verdict.note("moved", f"p{ack.partition} {ack.value[:40]!r} {ack.offset} -> {first}")
        by_sender.setdefault((ack.producer, ack.partition), []).append(
            (ack.sequence, first, ack.value)
        )
    for (producer, partition), found in by_sender.items():
        found.sort()
        for (_, before, _), (_, after, value) in itertools.pairwise(found):
            if after < before:
                verdict.reordered += 1
                verdict.note("reordered", f"{producer} p{partition} {value[:40]!r} at {after}")
    known = set(sent)
    for key in where:
        if key not in acked_values and (not known or key[1] in known):
            verdict.unacked_found += 1
    return verdict
