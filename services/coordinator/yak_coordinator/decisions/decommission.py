"""Broker decommission, the controller half (pure): drain a broker's replicas onto the others.

``yak brokers decommission ID`` writes ``decommissions/<id>`` (``BrokerDecommission``); from
then on the broker is *draining* until ``yak brokers recommission ID`` deletes the key:

- **leadership** — ``reconcile`` treats a draining broker like one in controlled shutdown: it
  is elected for nothing (not as a new leader, not as the preferred one) and a partition it
  leads moves to another live in-sync replica, so clients stop using it at once;
- **replicas** — ``drain_moves`` starts a reassignment (``reassignment.start_reassignment``)
  of each partition with a replica on a draining broker: the target keeps the other replicas
  in their order and puts a replacement in the draining broker's place. The replacement is a
  live broker that is neither draining nor shutting down nor a replica already, chosen by
  (its rack already holds a replica of the partition, replicas it holds, id) — so racks stay
  spread when they can and the load goes to the emptiest broker. The move completes like any
  reassignment: the new replica fetches, joins the ISR, the draining one is dropped and its
  broker deletes the local copy. A draining broker may be dead: its replicas are replaced
  the same way (from the surviving in-sync replicas);
- **pace** — at most ``max_moves`` reassignments run at once in the whole cluster (counting
  moves started by an operator), like Kafka's reassignment throttles bound the copy traffic;
  the next ones start as moves complete;
- **blocked** — a partition whose move cannot start says why in ``drain_progress``: no
  eligible broker left (fewer brokers than its replication factor), offline (no leader to
  copy from), or another reassignment of it is running (it is drained once that one ends).

New partitions are not placed on draining brokers and the admin API refuses reassignments
onto them. The broker is drained when no partition lists it as a replica; it can then be
stopped with nothing under-replicated. Recommissioning does not move anything back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from yak.metadata.models import BrokerRegistration, PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.decisions.reassignment import start_reassignment

__all__ = ["DrainProgress", "drain_moves", "drain_progress", "eligible_brokers"]


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """How far the drain of one broker is."""

    broker_id: int
    alive: bool
    #: Partitions it still leads.
    leaders: int
    #: Partitions that still list it as a replica (including those being moved off it).
    replicas: int
    #: Of those, the ones with a reassignment running.
    moving: int
    #: ``topic-partition: reason`` for partitions that cannot be moved off it now.
    blocked: tuple[str, ...]

    @property
    def done(self) -> bool:
        return self.replicas == 0 and self.leaders == 0


def eligible_brokers(snapshot: ClusterSnapshot) -> dict[int, BrokerRegistration]:
    """Live brokers that may take new replicas: not draining, not shutting down."""
    draining = snapshot.draining
    return {b: r for b, r in snapshot.brokers.items() if b not in draining and not r.shutting_down}


def _load(snapshot: ClusterSnapshot) -> dict[int, int]:
    load: dict[int, int] = {}
    for state in snapshot.partitions.values():
        for replica in state.replicas:
            load[replica] = load.get(replica, 0) + 1
    return load


def _replacement(
    state: PartitionState,
    kept: list[int],
    eligible: Mapping[int, BrokerRegistration],
    load: Mapping[int, int],
) -> int | None:
    racks = {eligible[r].rack for r in kept if r in eligible}
    candidates = [b for b in eligible if b not in state.replicas and b not in kept]
    if not candidates:
        return None
    return min(candidates, key=lambda b: (eligible[b].rack in racks, load.get(b, 0), b))


def _blocker(
    state: PartitionState, eligible: Mapping[int, BrokerRegistration], draining: frozenset[int]
) -> str | None:
    """Why the partition's replicas on draining brokers cannot start moving, if so."""
    if state.reassigning:
        return "another reassignment is running"
    if not state.has_leader:
        return "offline: no leader to copy from"
    needed = sum(1 for r in state.replicas if r in draining)
    spare = [b for b in eligible if b not in state.replicas]
    if len(spare) < needed:
        return f"not enough brokers: needs {needed} more outside {list(state.replicas)}"
    return None


def drain_moves(
    snapshot: ClusterSnapshot, *, max_moves: int = 10
) -> list[tuple[PartitionState, PartitionState]]:
    """(before, after) for the reassignments to start now (see the module doc)."""
    draining = snapshot.draining
    if not draining:
        return []
    eligible = eligible_brokers(snapshot)
    load = _load(snapshot)
    running = sum(1 for s in snapshot.partitions.values() if s.reassigning)
    moves: list[tuple[PartitionState, PartitionState]] = []
    for (topic, _), state in sorted(snapshot.partitions.items()):
        if running >= max_moves:
            break
        record = snapshot.topics.get(topic)
        if record is None or record.deleting or not draining.intersection(state.replicas):
            continue
        if _blocker(state, eligible, draining) is not None:
            continue
        target: list[int] = []
        for replica in state.replicas:
            if replica not in draining:
                target.append(replica)
                continue
            chosen = _replacement(state, target, eligible, load)
            assert chosen is not None  # _blocker checked there are enough spare brokers
            target.append(chosen)
            load[chosen] = load.get(chosen, 0) + 1
        moves.append((state, start_reassignment(state, target)))
        running += 1
    return moves


def drain_progress(snapshot: ClusterSnapshot, broker_id: int) -> DrainProgress:
    """The drain of ``broker_id`` as the snapshot shows it (pure)."""
    eligible = eligible_brokers(snapshot)
    draining = snapshot.draining
    leaders = replicas = moving = 0
    blocked: list[str] = []
    for (topic, partition), state in sorted(snapshot.partitions.items()):
        if broker_id not in state.replicas:
            continue
        replicas += 1
        leaders += int(state.leader == broker_id)
        if state.reassigning and broker_id in state.removing_replicas:
            moving += 1
            continue
        reason = _blocker(state, eligible, draining)
        if reason is not None:
            blocked.append(f"{topic}-{partition}: {reason}")
    return DrainProgress(
        broker_id=broker_id,
        alive=broker_id in snapshot.brokers,
        leaders=leaders,
        replicas=replicas,
        moving=moving,
        blocked=tuple(blocked),
    )
