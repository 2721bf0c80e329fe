"""What the controller must change: a pure function of one ``ClusterSnapshot``.

``reconcile(snapshot)`` compares the desired state (topic records) with the actual state
(partition states, live brokers) and returns the writes that converge them. It reads no clock,
store or network, so the same snapshot always gives the same actions; the driver
(``reconciler.py``) applies them with compare-and-swap writes fenced by the controller epoch and
calls ``reconcile`` again on the next snapshot. Because decisions depend only on state, never on
remembered events, a coordinator that takes over halfway through any operation finishes it.

Rules (Kafka's controller, KRaft flavour):

- A topic with fewer partition states than ``partitions`` gets the missing ones: replicas from
  ``placement.assign_replicas`` over the live brokers (start index = CRC-32 of the topic name),
  leader = first replica, ISR = replicas, epochs 0. With fewer live brokers than the
  replication factor nothing is created until enough brokers are back.
- A partition whose leader is not alive elects the first replica (in replica order) that is
  in the ISR and alive; none → ``NO_LEADER``, unless the topic sets
  ``unclean.leader.election.enable=true``: then the first live replica, and ISR = [it].
- Dead brokers leave the ISR, but the ISR never becomes empty: the last leader stays in it so
  that it can be re-elected cleanly when it returns (``NO_LEADER`` until then).
- Lost logs (empty-disk restarts, docs/replication.md): a live broker whose registration names
  another data folder (``log_dir_id``) than its ISR entry (``isr_log_dirs``) lost the log the
  ISR counted on. It counts as dead for that partition: it leaves the ISR and is not elected;
  a partition it led elects another in-sync replica. Kept as the last ISR member (the ISR
  never empties) it is still never elected, and an unclean election takes it only when no
  other replica is alive. New partition states record each member's folder.
- A leaderless partition whose ISR member comes back elects it.
- Preferred leader: when ``replicas[0]`` is alive and in the ISR but does not lead, leadership
  moves back to it (``auto_leader_rebalance``).
- Reassignment (``adding_replicas``/``removing_replicas`` set by the admin API): once every
  target replica is in the ISR, the move completes — the removed replicas leave ``replicas``
  and the ISR, leadership moves to the first in-sync target replica if the leader is being
  removed (``leader_epoch`` + 1). A leader that is not a replica at all (a cancelled move) is
  replaced like a dead one.
- Controlled shutdown: a live broker whose registration says ``shutting_down`` is elected for
  nothing — not as a new leader, not as the preferred one — and a partition it leads moves to
  the first other live ISR member (in replica order); with none, it keeps leading until it
  is gone.
- A failed data folder (KIP-112): a broker whose registration lists ``offline_log_dirs`` (a
  full disk, an I/O error) counts as dead for its replicas — it leaves their ISRs, a
  partition it led elects another in-sync replica, and it gets no new partitions — until it
  clears the mark; then its leaders add it back to the ISRs once it caught up, as for a
  broker that came back. (Yak's broker has one data folder: the mark covers all its replicas.)
- Decommission (``decommissions/<id>``, see ``decommission.py``): a draining broker is treated
  like one in controlled shutdown for leadership, gets no new partitions, and its replicas
  are reassigned onto the other brokers (``drain_moves``, at most ``max_drain_moves``
  reassignments running at once). A partition with another action this round waits for the
  next round.
- Preferred leader election on request (``elect_preferred_leader``, the admin API's
  ``elect-leaders``, Kafka's ElectLeaders with type PREFERRED): the same rule as the automatic
  rebalance, for chosen partitions, also when ``auto_leader_rebalance`` is off.
- ``leader_epoch`` + 1 whenever the leader changes (also to ``NO_LEADER``); ``partition_epoch``
  + 1 on every change of leader or ISR.
- A topic marked ``deleting`` is removed (its partition states, then nothing else to do); the
  partition states of a topic that has no record are removed too.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from yak.metadata.models import NO_LEADER, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot, PartitionMap
from yak.topic_config import UNCLEAN_LEADER_ELECTION, is_enabled
from yak_coordinator.decisions.decommission import drain_moves
from yak_coordinator.decisions.placement import BrokerSlot, assign_replicas

__all__ = [
    "STEP_PARTITIONS",
    "Action",
    "CreatePartitions",
    "DeleteTopic",
    "UpdatePartition",
    "elect_preferred_leader",
    "lost_logs",
    "next_partition_state",
    "placement_start_index",
    "plan_new_partitions",
    "reconcile",
    "reconcile_steps",
    "serving_brokers",
    "stopping_brokers",
]


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    """Create these partition states of ``topic`` (their keys must be absent)."""

    topic: str
    states: tuple[PartitionState, ...]


@dataclass(frozen=True, slots=True)
class UpdatePartition:
    """Replace ``before`` (which must still be stored) by ``after``; ``reason`` for the log."""

    before: PartitionState
    after: PartitionState
    reason: str


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """Remove ``topic``'s partition states and its record (``orphan``: no record is left)."""

    topic: str
    orphan: bool = False


Action = CreatePartitions | UpdatePartition | DeleteTopic


def placement_start_index(topic: str) -> int:
    """Where placement starts for ``topic``: deterministic, and spread over topics."""
    return zlib.crc32(topic.encode())


def plan_new_partitions(
    record: TopicRecord, existing: Sequence[int], brokers: Mapping[int, BrokerRegistration]
) -> tuple[PartitionState, ...]:
    """Initial states of the partitions of ``record`` that are not in ``existing``.

    Empty when nothing is missing or when there are fewer live brokers than replicas.
    """
    present = set(existing)
    missing = [p for p in range(record.partitions) if p not in present]
    if not missing or len(brokers) < record.replication_factor:
        return ()
    slots = [BrokerSlot(b.broker_id, b.rack) for b in brokers.values()]
    first = missing[0]
    assignment = assign_replicas(
        slots,
        record.partitions - first,
        record.replication_factor,
        start_index=placement_start_index(record.name),
        first_partition=first,
    )
    return tuple(
        PartitionState(
            topic=record.name,
            partition=p,
            leader=assignment[p - first][0],
            replicas=assignment[p - first],
            isr=assignment[p - first],
            isr_log_dirs={
                b: brokers[b].log_dir_id for b in assignment[p - first] if brokers[b].log_dir_id
            },
        )
        for p in missing
    )


def _elect(
    state: PartitionState,
    live: frozenset[int],
    isr: tuple[int, ...],
    *,
    unclean: bool,
    stopping: frozenset[int] = frozenset(),
    lost: frozenset[int] = frozenset(),
) -> tuple[int, tuple[int, ...], str]:
    """A new leader for a partition whose leader is gone, with the ISR that goes with it."""
    clean = [r for r in state.replicas if r in isr]
    ready = [r for r in clean if r not in stopping]
    if ready or clean:
        return (ready or clean)[0], isr, "leader election"
    alive = [r for r in state.replicas if r in live and r not in lost]
    alive += [r for r in state.replicas if r in lost]  # an empty log: the last resort
    if unclean and alive:
        return alive[0], (alive[0],), "unclean leader election"
    return NO_LEADER, isr, "no in-sync replica alive"


def lost_logs(state: PartitionState, log_dirs: Mapping[int, str]) -> frozenset[int]:
    """The live ISR members (``log_dirs``: live broker → its registered data folder id) whose
    in-sync log was lost: their registration names another folder than their ISR entry."""
    return frozenset(b for b in state.isr if b in log_dirs and state.log_dir_lost(b, log_dirs[b]))


def _preferred(state: PartitionState, isr: tuple[int, ...], stopping: frozenset[int]) -> int:
    """The preferred replica if it is alive, in sync and not stopping, else the current leader."""
    if state.replicas and state.replicas[0] in isr and state.replicas[0] not in stopping:
        return state.replicas[0]
    return state.leader


def _complete_reassignment(
    state: PartitionState, isr: tuple[int, ...], stopping: frozenset[int]
) -> PartitionState | None:
    """The state after a reassignment whose target replicas are all in sync, else None."""
    target = state.target_replicas
    if not state.reassigning or not target or not all(r in isr for r in target):
        return None  # an empty target (never written by the admin API) waits for a cancel
    new_isr = tuple(r for r in isr if r in target)
    leader = state.leader
    if leader not in target:
        ready = [r for r in target if r in new_isr and r not in stopping]
        leader = (ready or list(target))[0]
    return state.model_copy(
        update={
            "leader": leader,
            "replicas": target,
            "isr": new_isr,
            "isr_log_dirs": state.log_dirs_of(new_isr),
            "adding_replicas": (),
            "removing_replicas": (),
            "leader_epoch": state.leader_epoch + int(leader != state.leader),
            "partition_epoch": state.partition_epoch + 1,
        }
    )


def elect_preferred_leader(
    state: PartitionState,
    live: frozenset[int],
    stopping: frozenset[int] = frozenset(),
    log_dirs: Mapping[int, str] | None = None,
) -> PartitionState | str:
    """``state`` with leadership on its preferred replica (``replicas[0]``), or why not:
    ``ELECTION_NOT_NEEDED`` (it leads already) or ``PREFERRED_LEADER_NOT_AVAILABLE`` (it is
    dead, out of the ISR, lost its log, shutting down or draining) — Kafka's ElectLeaders
    answers. ``log_dirs``: live broker → its registered data folder id."""
    if state.replicas and state.leader == state.replicas[0]:
        return "ELECTION_NOT_NEEDED"
    lost = lost_logs(state, log_dirs or {})
    isr = tuple(r for r in state.isr if r in live and r not in lost)
    preferred = _preferred(state, isr, stopping)
    if preferred == state.leader:
        return "PREFERRED_LEADER_NOT_AVAILABLE"
    return state.model_copy(
        update={
            "leader": preferred,
            "leader_epoch": state.leader_epoch + 1,
            "partition_epoch": state.partition_epoch + 1,
        }
    )


def next_partition_state(
    state: PartitionState,
    live: frozenset[int],
    *,
    unclean: bool = False,
    preferred: bool = True,
    stopping: frozenset[int] = frozenset(),
    log_dirs: Mapping[int, str] | None = None,
) -> tuple[PartitionState, str] | None:
    """The state ``state`` should move to given the live brokers, or None if it is right.

    ``stopping``: live brokers in controlled shutdown; ``log_dirs``: live broker → the data
    folder id it registered (see the module doc; None: no folder ids known).
    """
    lost = lost_logs(state, log_dirs or {})
    isr = tuple(r for r in state.isr if r in live and r not in lost)
    leader, reason = state.leader, "dead replica left the ISR"
    if lost:
        reason = "replica that lost its log left the ISR"
    completed = _complete_reassignment(state, isr, stopping)
    if completed is not None:
        return completed, "reassignment completed"
    others = [r for r in state.replicas if r in isr and r not in stopping and r != leader]
    if leader not in live or leader not in state.replicas or leader in lost:
        leader, isr, reason = _elect(
            state, live, isr, unclean=unclean, stopping=stopping, lost=lost
        )
    elif leader in stopping and others:
        leader, reason = others[0], "controlled shutdown"
    elif preferred and _preferred(state, isr, stopping) != leader:
        leader, reason = _preferred(state, isr, stopping), "preferred leader election"
    if not isr:  # never empty: keep the last leader so it can be re-elected cleanly
        isr = (state.leader,) if state.leader in state.isr else state.isr[:1]
    if leader == state.leader and isr == state.isr:
        return None
    dirs = state.log_dirs_of(isr)
    if reason == "unclean leader election":  # its log as it is now
        folder = (log_dirs or {}).get(leader, "")
        dirs = {leader: folder} if folder else {}
    after = state.model_copy(
        update={
            "leader": leader,
            "isr": isr,
            "isr_log_dirs": dirs,
            "leader_epoch": state.leader_epoch + int(leader != state.leader),
            "partition_epoch": state.partition_epoch + 1,
        }
    )
    return after, reason


def _topic_actions(
    snapshot: ClusterSnapshot,
    record: TopicRecord,
    live: frozenset[int],
    *,
    preferred: bool,
    stopping: frozenset[int],
    log_dirs: Mapping[int, str],
) -> list[Action]:
    if record.deleting:
        return [DeleteTopic(record.name)]
    states = snapshot.partitions_of(record.name)
    actions: list[Action] = []
    placeable = {
        b: r
        for b, r in snapshot.brokers.items()
        if b not in snapshot.draining and not r.offline_log_dirs
    }
    created = plan_new_partitions(record, [s.partition for s in states], placeable)
    if created:
        actions.append(CreatePartitions(record.name, created))
    unclean = is_enabled(record.configs, UNCLEAN_LEADER_ELECTION)
    for state in states:
        change = next_partition_state(
            state,
            live,
            unclean=unclean,
            preferred=preferred,
            stopping=stopping,
            log_dirs=log_dirs,
        )
        if change is not None:
            actions.append(UpdatePartition(state, *change))
    return actions


def serving_brokers(snapshot: ClusterSnapshot) -> frozenset[int]:
    """The live brokers whose data folder serves: registered, no folder marked offline (a
    broker with a failed folder counts as dead for its replicas, see the module doc)."""
    return frozenset(b for b, r in snapshot.brokers.items() if not r.offline_log_dirs)


def stopping_brokers(snapshot: ClusterSnapshot) -> frozenset[int]:
    """Brokers elected for nothing: in controlled shutdown, or being decommissioned."""
    shutting_down = {b for b, r in snapshot.brokers.items() if r.shutting_down}
    return frozenset(shutting_down | snapshot.draining)


def _partition_topics(snapshot: ClusterSnapshot) -> set[str]:
    """The topics that have partition states."""
    if isinstance(snapshot.partitions, PartitionMap):
        return set(snapshot.partitions.topics())
    return {topic for topic, _ in snapshot.partitions}


#: Partitions decided between two steps of ``reconcile_steps``: a full pass over 20,000
#: partitions held the coordinator's event loop 65-83 ms in one piece (bench-scale's loop-lag
#: goal is 50 ms); 1,000 is ~3-4 ms a step.
STEP_PARTITIONS = 1_000


def reconcile_steps(
    snapshot: ClusterSnapshot,
    *,
    auto_leader_rebalance: bool = True,
    max_drain_moves: int = 10,
    topics: Collection[str] | None = None,
    step_partitions: int = STEP_PARTITIONS,
) -> Iterator[list[Action]]:
    """``reconcile``'s actions, decided lazily in steps of at least ``step_partitions``
    partitions (whole topics), the last step with the decommission moves and the orphaned
    topics. Every step decides from the same ``snapshot`` (immutable), so a caller may give
    its event loop a turn between steps and still act on one consistent state."""
    live = serving_brokers(snapshot)
    stopping = stopping_brokers(snapshot)
    log_dirs = {b: r.log_dir_id for b, r in snapshot.brokers.items()}
    chosen = snapshot.topics.keys() if topics is None else set(topics)
    touched: set[tuple[str, int]] = set()
    step: list[Action] = []
    decided = 0
    for name in sorted(chosen & snapshot.topics.keys()):
        record = snapshot.topics[name]
        found = _topic_actions(
            snapshot,
            record,
            live,
            preferred=auto_leader_rebalance,
            stopping=stopping,
            log_dirs=log_dirs,
        )
        touched.update(
            (a.before.topic, a.before.partition) for a in found if isinstance(a, UpdatePartition)
        )
        step += found
        decided += max(record.partitions, 1)
        if decided >= step_partitions:
            yield step
            step, decided = [], 0
    for before, after in drain_moves(snapshot, max_moves=max_drain_moves):
        if (before.topic, before.partition) not in touched:
            step.append(UpdatePartition(before, after, "decommission: moving replicas off"))
    if topics is None:
        orphaned = _partition_topics(snapshot) - snapshot.topics.keys()
    else:
        orphaned = {t for t in chosen - snapshot.topics.keys() if snapshot.partitions_of(t)}
    step += [DeleteTopic(topic, orphan=True) for topic in sorted(orphaned)]
    yield step


def reconcile(
    snapshot: ClusterSnapshot,
    *,
    auto_leader_rebalance: bool = True,
    max_drain_moves: int = 10,
    topics: Collection[str] | None = None,
) -> list[Action]:
    """Every write needed to bring ``snapshot`` to its desired state, topic by topic.

    ``topics``: decide for these topics only (their records, partition states and orphaned
    states; what a change to them can call for) — the same actions a full pass has for them.
    None: every topic. Decommission moves (``drain_moves``) are decided either way.
    """
    steps = reconcile_steps(
        snapshot,
        auto_leader_rebalance=auto_leader_rebalance,
        max_drain_moves=max_drain_moves,
        topics=topics,
    )
    return [action for step in steps for action in step]
