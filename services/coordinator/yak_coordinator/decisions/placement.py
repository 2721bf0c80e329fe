"""Replica placement for new topics and added partitions: a pure function, Kafka's algorithm.

Kafka (``AdminUtils.assignReplicasToBrokers``) spreads replicas so that

- leaders (first replicas) go round-robin over the brokers from a start index, so every broker
  leads ``floor`` or ``ceil`` of P/N partitions;
- the other replicas of a partition follow the leader at a shift that grows by one every N
  partitions, so the followers of one broker's partitions are spread over the others;
- with racks, the broker list alternates racks (rack A's first broker, rack B's first, ...)
  and a follower is skipped if its rack already holds a replica of the partition while some
  rack does not yet, so a partition survives the loss of a rack when RF <= racks.

The start index and the first shift come from the caller (the coordinator derives them from
the topic, so placement is deterministic and testable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from yak.errors import InvalidPartitionsError, InvalidReplicationFactorError

__all__ = ["BrokerSlot", "assign_replicas"]


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    """A broker that can hold replicas, and its rack (None when racks are not configured)."""

    broker_id: int
    rack: str | None = None


def _rack_alternated(brokers: Sequence[BrokerSlot]) -> list[BrokerSlot]:
    """Brokers ordered rack by rack in turn: a1, b1, c1, a2, b2, ... (ids ascending per rack)."""
    by_rack: dict[str | None, list[BrokerSlot]] = {}
    for slot in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(slot.rack, []).append(slot)
    racks = [by_rack[rack] for rack in sorted(by_rack, key=lambda r: (r is None, r or ""))]
    ordered: list[BrokerSlot] = []
    for i in range(max(len(group) for group in racks)):
        ordered.extend(group[i] for group in racks if i < len(group))
    return ordered


def assign_replicas(
    brokers: Sequence[BrokerSlot],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    first_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists (leader first) for partitions ``first_partition .. +partitions-1``."""
    if partitions < 1:
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, got {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the number of "
            f"available brokers ({len(brokers)})"
        )
    ordered = _rack_alternated(brokers)
    n = len(ordered)
    rack_count = len({slot.rack for slot in ordered})
    shift = start_index % n
    assignment: list[tuple[int, ...]] = []
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        followers = [ordered[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(n - 1)]
        chosen = [ordered[first]]
        # First pass honours racks (a new rack while some rack is unused); the second fills up.
        for rack_aware in (True, False):
            for candidate in followers:
                if len(chosen) == replication_factor:
                    break
                used_racks = {slot.rack for slot in chosen}
                rack_taken = candidate.rack in used_racks and len(used_racks) < rack_count
                if candidate not in chosen and not (rack_aware and rack_taken):
                    chosen.append(candidate)
        assignment.append(tuple(slot.broker_id for slot in chosen))
    return assignment
