"""Partition reassignment plans (pure): Kafka's JSON format, generation and verification.

The format is kafka-reassign-partitions' ``--reassignment-json-file``::

    {"version": 1,
     "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2],
                     "log_dirs": ["any", "any"]}]}

``log_dirs`` is optional and, Yak having one data folder per broker, must be ``"any"``.

``generate_plan`` moves partitions onto a broker list with as little copying as balance
allows (Kafka's ``--generate`` places everything afresh; this keeps what it can):

1. **keep** — each partition (in topic, partition order) keeps its replicas that are on the
   listed brokers, except one whose rack the partition already uses while another rack is
   free;
2. **fill** — missing replicas go to the listed broker with (rack already used by the
   partition, replicas so far, id) smallest: racks spread first, then load;
3. **balance** — while some broker holds two replicas more than another, one replica moves
   from the fullest to the emptiest broker (a partition that has none there, without putting
   two of its replicas in one rack), so each broker ends within one replica of the others;
4. **lead** — the first replica (the preferred leader) stays the current one when it was kept
   (else the partition's replica leading the fewest so far); then, while some broker leads
   two partitions more than another, one partition's leadership moves between them when the
   emptier broker is one of its replicas (a reorder, no copy).

Only partitions whose replica list changes are in the plan. ``rollback_plan`` is the current
assignment of the same partitions, to undo a plan with ``--execute``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

__all__ = [
    "PlanEntry",
    "PlanStatus",
    "format_plan",
    "generate_plan",
    "parse_plan",
    "plan_document",
    "plan_status",
]


class PlanEntry(NamedTuple):
    """One partition's replica list (the first one is the preferred leader)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


#: Where a plan's partition is: moved as planned, moving, or on other replicas.
PlanStatus = Literal["complete", "in progress", "not started"]


def parse_plan(document: object) -> list[PlanEntry]:
    """The entries of a plan document; ``ValueError`` with the precise problem."""
    if not isinstance(document, dict):
        raise ValueError("a plan is a JSON object with version and partitions")
    if document.get("version", 1) != 1:
        raise ValueError(f"unsupported plan version {document.get('version')!r} (only 1)")
    partitions = document.get("partitions")
    if not isinstance(partitions, list):
        raise ValueError('a plan needs a "partitions" list')
    entries: list[PlanEntry] = []
    seen: set[tuple[str, int]] = set()
    for i, item in enumerate(partitions):
        entry = _entry(i, item)
        if (entry.topic, entry.partition) in seen:
            raise ValueError(f"partitions[{i}]: {entry.topic}-{entry.partition} is listed twice")
        seen.add((entry.topic, entry.partition))
        entries.append(entry)
    return entries


def _entry(i: int, item: object) -> PlanEntry:
    where = f"partitions[{i}]"
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object")
    topic, partition, replicas = item.get("topic"), item.get("partition"), item.get("replicas")
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"{where}: topic must be a non-empty string")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ValueError(f"{where}: partition must be an integer >= 0")
    if (
        not isinstance(replicas, list)
        or not replicas
        or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in replicas)
    ):
        raise ValueError(f"{where}: replicas must be a non-empty list of broker ids")
    if len(set(replicas)) != len(replicas):
        raise ValueError(f"{where}: replicas {replicas} repeat a broker")
    log_dirs = item.get("log_dirs")
    if log_dirs is not None and (
        not isinstance(log_dirs, list)
        or len(log_dirs) != len(replicas)
        or any(d != "any" for d in log_dirs)
    ):
        raise ValueError(f'{where}: log_dirs must be "any" per replica (one data dir a broker)')
    return PlanEntry(topic, partition, tuple(replicas))


def plan_document(entries: Iterable[PlanEntry]) -> dict[str, Any]:
    """The plan as Kafka's JSON document (sorted by topic and partition)."""
    return {
        "version": 1,
        "partitions": [
            {
                "topic": e.topic,
                "partition": e.partition,
                "replicas": list(e.replicas),
                "log_dirs": ["any"] * len(e.replicas),
            }
            for e in sorted(entries)
        ],
    }


def format_plan(entries: Iterable[PlanEntry]) -> str:
    """The plan document as JSON text, one partition per line (compact like Kafka's output,
    and readable in a diff)."""
    document = plan_document(entries)
    lines = [json.dumps(p, separators=(",", ":")) for p in document["partitions"]]
    return '{"version":1,"partitions":[\n' + ",\n".join(lines) + "\n]}"


def generate_plan(
    current: Sequence[PlanEntry], brokers: Mapping[int, str | None]
) -> list[PlanEntry]:
    """A plan moving ``current`` onto ``brokers`` (id → rack); see the module doc."""
    if not brokers:
        raise ValueError("the broker list is empty")
    ids = sorted(brokers)
    for e in current:
        if len(e.replicas) > len(ids):
            raise ValueError(
                f"{e.topic}-{e.partition} has {len(e.replicas)} replicas but only "
                f"{len(ids)} brokers are listed"
            )
    ordered = sorted(current)
    racks = _Racks(brokers)
    load = dict.fromkeys(ids, 0)
    assigned: list[list[int]] = []
    for e in ordered:  # keep what may stay
        keep: list[int] = []
        for r in e.replicas:
            if r in brokers and not racks.crowded(r, keep):
                keep.append(r)
                load[r] += 1
        assigned.append(keep)
    for e, keep in zip(ordered, assigned, strict=True):  # fill
        while len(keep) < len(e.replicas):
            chosen = min(
                (b for b in ids if b not in keep),
                key=lambda b: (racks.used(b, keep), load[b], b),
            )
            keep.append(chosen)
            load[chosen] += 1
    _balance(assigned, load, racks)
    return _with_leaders(ordered, assigned, ids)


class _Racks:
    """Rack questions about the listed brokers."""

    def __init__(self, brokers: Mapping[int, str | None]) -> None:
        self._rack = dict(brokers)
        self._count = len(set(brokers.values()))

    def used(self, broker: int, replicas: Sequence[int]) -> bool:
        """Whether ``broker``'s rack already holds one of ``replicas``."""
        return self._rack.get(broker) in {self._rack.get(r) for r in replicas}

    def crowded(self, broker: int, others: Sequence[int]) -> bool:
        """Whether ``broker`` shares a rack with ``others`` while some rack holds none."""
        held = {self._rack.get(r) for r in others}
        return self._rack.get(broker) in held and len(held) < self._count


def _even_out(
    holders: list[list[int]], count: dict[int, int], move: Callable[[int, int, int], bool]
) -> None:
    """While some broker counts two more than another, ``move(i, hi, lo)`` one unit of
    partition ``i`` from the fullest to the emptiest broker that it can (each move lowers the
    sum of squared counts, so this ends)."""
    while True:
        by_count = sorted(count, key=lambda b: (count[b], b))
        pairs = (
            (hi, lo) for lo in by_count for hi in reversed(by_count) if count[hi] - count[lo] > 1
        )
        if not any(
            any(hi in held and move(i, hi, lo) for i, held in enumerate(holders))
            for hi, lo in pairs
        ):
            return


def _balance(assigned: list[list[int]], load: dict[int, int], racks: _Racks) -> None:
    """Move single replicas from the fullest brokers to the emptiest."""

    def move(i: int, hi: int, lo: int) -> bool:
        replicas = assigned[i]
        others = [r for r in replicas if r != hi]
        if lo in replicas or (racks.used(lo, others) and not racks.used(hi, others)):
            return False  # no two replicas on one broker, nor newly in one rack
        replicas[replicas.index(hi)] = lo
        load[hi] -= 1
        load[lo] += 1
        return True

    _even_out(assigned, load, move)


def _with_leaders(
    ordered: list[PlanEntry], assigned: list[list[int]], ids: list[int]
) -> list[PlanEntry]:
    """Keep each current leader that stays a replica, then even out leadership."""
    leading = dict.fromkeys(ids, 0)
    leaders: list[list[int]] = []
    for e, keep in zip(ordered, assigned, strict=True):
        first = e.replicas[0] if e.replicas[0] in keep else min(keep, key=lambda b: leading[b])
        leading[first] += 1
        leaders.append([first])

    def move(i: int, hi: int, lo: int) -> bool:
        if lo not in assigned[i]:
            return False
        leaders[i][0] = lo
        leading[hi] -= 1
        leading[lo] += 1
        return True

    _even_out(leaders, leading, move)
    plan: list[PlanEntry] = []
    for e, keep, (first,) in zip(ordered, assigned, leaders, strict=True):
        replicas = (first, *(r for r in keep if r != first))
        if replicas != e.replicas:
            plan.append(PlanEntry(e.topic, e.partition, replicas))
    return plan


def plan_status(
    entry: PlanEntry, replicas: Sequence[int], adding: Sequence[int], removing: Sequence[int]
) -> PlanStatus:
    """Where ``entry`` stands given its partition's current replica list and move."""
    if adding or removing:
        target = tuple(r for r in replicas if r not in removing)
        return "in progress" if target == entry.replicas else "not started"
    return "complete" if tuple(replicas) == entry.replicas else "not started"
