"""A simulated Yak cluster for replication tests: three brokers on real logs, one controller.

Each broker holds a real ``Log`` per partition in a temp folder and runs the machines the broker
runs (``LeaderPartition``; ``FollowerPartition`` in one ``FetchSession`` per leader broker),
given roles from metadata exactly as ``ReplicaManager`` gives them. Simulated around them:

- the **network** (``sim_network``): fetch rounds and answers, lost in cuts or at random;
  metadata and ISR proposals are etcd traffic — delayed and reordered, never lost;
- the **controller**: ``yak_coordinator.reconcile.next_partition_state`` over the registered
  brokers (election of the first live ISR member in replica order, dead brokers out of the ISR
  without emptying it, preferred leader back), and the leaders' ``AlterIsr`` applied by
  compare-and-swap on ``partition_epoch`` (the broker's ``isr_writer``);
- **time**: a ``FakeClock`` moved only by ``tick``; leaders are ticked then (ISR shrink by lag);
- **faults**: ``crash`` (a process crash: machines gone, logs reopened from disk by
  ``restart``; the page cache survives, so no fsynced-or-not distinction), ``expire`` (the
  crashed or cut-off broker's lease ends: the controller reacts; a restart waits for it, as the
  broker's registrar does), cut links, ``isolate`` (from every broker) and ``isolate`` with
  ``from_etcd`` (a zombie: its proposals fail, it hears no metadata until healed).

Producers' batches carry a unique batch id in their timestamp (``BASE_TS + id``), so logs are
compared by batch headers alone. An acks=all batch is acknowledged when its leader machine emits
``HighWatermarkAdvanced`` past it while still leading; ``acked`` records offset → batch id.
Every operation is synchronous and deterministic given the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from tests.unit.broker.replication.sim_network import (
    CONTROLLER,
    Body,
    Envelope,
    Fetch,
    FetchReply,
    Metadata,
    Network,
    Propose,
    ProposeResult,
)
from yak.clock import FakeClock
from yak.errors import NotEnoughReplicasError, OffsetOutOfRangeError
from yak.metadata.models import NO_LEADER, PartitionState
from yak.record import RecordInput, encode_batch
from yak_broker.replication.fetch_session import FetchSession
from yak_broker.replication.follower_partition import FollowerPartition
from yak_broker.replication.leader_partition import LeaderPartition
from yak_broker.replication.messages import (
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    AlterIsr,
    EpochAnswer,
    FetchAnswer,
    FetchPosition,
    HighWatermarkAdvanced,
    LeaderOutput,
)
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import LogConfig
from yak_coordinator.reconcile import next_partition_state

TOPIC = "sim"
BROKERS = (0, 1, 2)
MIN_INSYNC = 2
LAG_MAX_MS = 3_000
BASE_TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2048)  # small segments: rolls, reads that stop at a segment
_LOG_END = FetchIsolation.LOG_END


@dataclass(eq=False)
class Replica:
    """One partition on one broker (one incarnation of it)."""

    partition: int
    log: Log
    state: PartitionState | None = None
    leader: LeaderPartition | None = None
    follower: FollowerPartition | None = None
    version: int = 0  # bumped whenever the log may have changed (see sim_invariants)


@dataclass(eq=False)
class Broker:
    broker_id: int
    replicas: dict[int, Replica]
    incarnation: int = 0
    alive: bool = True
    sessions: dict[int, FetchSession] = field(default_factory=dict)  # by leader broker


@dataclass(frozen=True, eq=False)
class Waiting:
    """An acks=all batch waiting for its leader's high watermark."""

    partition: int
    machine: LeaderPartition
    batch_id: int
    first_offset: int
    end: int


class Cluster:
    def __init__(self, folder: Path, partitions: int, rng: random.Random) -> None:
        self.folder = folder
        self.rng = rng
        self.clock = FakeClock(BASE_TS)
        self.network = Network()
        self.partitions = tuple(range(partitions))
        self.states = {p: _initial_state(p) for p in self.partitions}
        self.registered = set(BROKERS)  # brokers with a live lease
        self.zombies: set[int] = set()  # running, cut off from every broker and from etcd
        self.acked: dict[int, dict[int, int]] = {p: {} for p in self.partitions}
        self.acked_batches: dict[int, list[tuple[int, int]]] = {p: [] for p in self.partitions}
        self.waiting: list[Waiting] = []
        self.next_batch = 0
        self.trace: list[str] = []
        self.brokers = {b: Broker(b, self._open_replicas(b)) for b in BROKERS}
        for broker in self.brokers.values():
            self._catch_up_metadata(broker)

    def _open_replicas(self, broker_id: int) -> dict[int, Replica]:
        return {
            p: Replica(
                p, Log.open(self.folder / f"b{broker_id}" / f"{TOPIC}-{p}", CONFIG, self.clock)
            )
            for p in self.partitions
        }

    def now(self) -> int:
        return self.clock.time_ms()

    def note(self, line: str) -> None:
        self.trace.append(f"[{self.now() - BASE_TS}] {line}")

    # --- clients ---------------------------------------------------------------------------

    def produce(self, partition: int, broker_id: int, *, acks_all: bool, records: int = 1) -> str:
        """A producer's request to ``broker_id``; what it answered (acks=all: accepted only)."""
        broker = self.brokers[broker_id]
        replica = broker.replicas[partition]
        machine = replica.leader
        if not broker.alive or machine is None:
            return "NOT_LEADER_OR_FOLLOWER"
        if acks_all:
            try:
                machine.check_acks_all(MIN_INSYNC)
            except NotEnoughReplicasError as exc:
                return exc.code
        batch_id, self.next_batch = self.next_batch, self.next_batch + 1
        stamp = BASE_TS + batch_id
        batch = encode_batch(
            [RecordInput(value=b"%d" % i, timestamp=stamp) for i in range(records)]
        )
        info = replica.log.append(batch, machine.leader_epoch)
        replica.version += 1
        self.note(f"produce #{batch_id} p{partition} on {broker_id} at {info.first_offset}")
        if acks_all:
            end = info.last_offset + 1
            self.waiting.append(Waiting(partition, machine, batch_id, info.first_offset, end))
        self._carry_out(broker, replica, machine.on_append(self.now()))
        return "OK"

    # --- follower fetching -----------------------------------------------------------------

    def fetch_round(self, broker_id: int, leader_id: int) -> bool:
        """``broker_id``'s fetcher for ``leader_id`` sends a round; False if it had nothing."""
        broker = self.brokers[broker_id]
        session = broker.sessions.get(leader_id)
        if not broker.alive or session is None:
            return False
        round_ = session.build()
        if not round_:
            return False
        leader = self.brokers[leader_id]
        self._send(broker, leader_id, leader.incarnation, Fetch(session, round_))
        return True

    def fetch_rounds(self) -> list[tuple[int, int]]:
        return [
            (broker.broker_id, leader_id)
            for broker in self.brokers.values()
            if broker.alive
            for leader_id, session in broker.sessions.items()
            if len(session)
        ]

    def _serve_fetch(self, leader: Broker, follower: int, incarnation: int, body: Fetch) -> None:
        """The leader's side of offsets-for-leader-epoch and fetch (``offsets``, ``fetcher``)."""
        epoch_answers = []
        for query in body.round.epoch_queries():
            machine = leader.replicas[query.partition].leader
            if machine is None:
                epoch_answers.append(
                    EpochAnswer(query.topic, query.partition, error=NOT_LEADER_OR_FOLLOWER)
                )
            else:
                epoch_answers.append(machine.answer_epoch_query(query))
        fetch_answers = [self._read(leader, follower, p) for p in body.round.fetch_positions()]
        reply = FetchReply(body.session, body.round, tuple(epoch_answers), tuple(fetch_answers))
        self._send(leader, follower, incarnation, reply)

    def _read(self, leader: Broker, follower: int, position: FetchPosition) -> FetchAnswer:
        topic, partition = position.topic, position.partition
        replica = leader.replicas[partition]
        machine = replica.leader
        if machine is None:
            return FetchAnswer(topic, partition, error=NOT_LEADER_OR_FOLLOWER)
        error = machine.check_fetch_epoch(position.current_leader_epoch)
        if error is not None:
            return FetchAnswer(topic, partition, error=error)
        outputs = machine.on_follower_fetch(follower, position.fetch_offset, self.now())
        self._carry_out(leader, replica, outputs)
        log = replica.log
        try:
            data = log.read(position.fetch_offset, self.rng.choice((150, 1 << 20)), _LOG_END)
        except OffsetOutOfRangeError:
            start = log.log_start_offset
            return FetchAnswer(
                topic, partition, log.high_watermark, start, error=OFFSET_OUT_OF_RANGE
            )
        return FetchAnswer(
            topic, partition, data.high_watermark, data.log_start_offset, bytes(data.records)
        )

    def _on_fetch_reply(self, broker: Broker, body: FetchReply) -> None:
        touched = {q.partition for q in body.round.epoch_queries()}
        touched |= {p.partition for p in body.round.fetch_positions()}
        ends = {p: broker.replicas[p].log.log_end_offset for p in touched}
        body.session.on_epoch_answers(body.round, body.epoch_answers)
        for p in touched:
            replica = broker.replicas[p]
            replica.version += 1
            if replica.log.log_end_offset < ends[p]:
                self.note(f"truncate p{p} on {broker.broker_id}: {ends[p]} -> {replica.log}")
        body.session.on_fetch_answers(body.round, body.fetch_answers)

    # --- the leader's outputs, acks --------------------------------------------------------

    def _carry_out(self, broker: Broker, replica: Replica, outputs: list[LeaderOutput]) -> None:
        for output in outputs:
            if isinstance(output, AlterIsr):
                machine = replica.leader
                assert machine is not None
                self.note(
                    f"propose p{output.partition} ISR {output.new_isr} from {broker.broker_id}"
                )
                self._send(broker, CONTROLLER, -1, Propose(output, machine))
            elif isinstance(output, HighWatermarkAdvanced):
                assert output.high_watermark == replica.log.high_watermark
                self._complete_acks(replica)

    def _complete_acks(self, replica: Replica) -> None:
        still = []
        for waiting in self.waiting:
            if waiting.machine is not replica.leader or replica.log.high_watermark < waiting.end:
                still.append(waiting)
                continue
            for offset in range(waiting.first_offset, waiting.end):
                self.acked[waiting.partition][offset] = waiting.batch_id
            self.acked_batches[waiting.partition].append((waiting.batch_id, waiting.first_offset))
            self.note(f"ack #{waiting.batch_id} p{waiting.partition} at {waiting.first_offset}")
        self.waiting = still

    # --- messages ------------------------------------------------------------------------

    def _send(self, src: Broker, dst: int, dst_incarnation: int, body: Body) -> None:
        envelope = Envelope(src.broker_id, src.incarnation, dst, dst_incarnation, body)
        self.network.send(envelope)

    def deliver(self, envelope: Envelope | None) -> None:
        if envelope is None:
            return
        body = envelope.body
        if isinstance(body, Propose):
            self._alter_isr(envelope, body)
            return
        broker = self.brokers[envelope.dst]
        if not broker.alive or broker.incarnation != envelope.dst_incarnation:
            return  # the process it was for is gone
        if isinstance(body, Metadata):
            if broker.broker_id not in self.zombies:
                self._apply_state(broker, body.state)
        elif isinstance(body, Fetch):
            self._serve_fetch(broker, envelope.src, envelope.src_incarnation, body)
        elif isinstance(body, FetchReply):
            self._on_fetch_reply(broker, body)
        else:
            self._on_proposal_result(broker, body)

    def deliver_all(self) -> None:
        while self.network.queue:
            self.deliver(self.network.take())

    # --- controller and etcd ---------------------------------------------------------------

    def _publish(self, state: PartitionState, why: str) -> None:
        self.states[state.partition] = state
        self.note(
            f"commit p{state.partition} leader {state.leader} epoch {state.leader_epoch}/"
            f"{state.partition_epoch} ISR {state.isr} ({why})"
        )
        for broker in self.brokers.values():
            if broker.alive and broker.broker_id not in self.zombies:
                self.network.send(
                    Envelope(CONTROLLER, -1, broker.broker_id, broker.incarnation, Metadata(state))
                )

    def reconcile(self) -> None:
        live = frozenset(self.registered)
        for p in self.partitions:
            for _ in range(4):
                change = next_partition_state(self.states[p], live)
                if change is None:
                    break
                self._publish(*change)

    def _alter_isr(self, envelope: Envelope, body: Propose) -> None:
        proposal = body.proposal
        state = self.states[proposal.partition]
        committed = None
        if envelope.src not in self.zombies and (
            state.leader,
            state.leader_epoch,
            state.partition_epoch,
        ) == (proposal.leader_id, proposal.leader_epoch, proposal.expected_partition_epoch):
            assert proposal.leader_id in proposal.new_isr
            assert set(proposal.new_isr) <= set(state.replicas)
            committed = state.model_copy(
                update={"isr": proposal.new_isr, "partition_epoch": state.partition_epoch + 1}
            )
            self._publish(committed, "AlterIsr")
            self.reconcile()
        result = ProposeResult(proposal, body.machine, committed)
        self.network.send(Envelope(CONTROLLER, -1, envelope.src, envelope.src_incarnation, result))

    def _on_proposal_result(self, broker: Broker, body: ProposeResult) -> None:
        replica = broker.replicas[body.proposal.partition]
        machine = body.machine
        if replica.leader is not machine:
            return
        if body.committed is None:
            machine.on_proposal_failed(body.proposal)
        else:
            self._apply_state(broker, body.committed)

    # --- roles (as ReplicaManager gives them) ----------------------------------------------

    def _apply_state(self, broker: Broker, state: PartitionState) -> None:
        replica = broker.replicas[state.partition]
        known = replica.state
        if known is not None and (state.leader_epoch, state.partition_epoch) < (
            known.leader_epoch,
            known.partition_epoch,
        ):
            return  # older than what this broker knows
        replica.state = state
        me = broker.broker_id
        if state.leader == me:
            self._retire_follower(broker, replica)
            machine = replica.leader
            if machine is None or machine.leader_epoch != state.leader_epoch:
                if machine is not None:
                    machine.on_state(state, self.now())  # retires it
                machine = LeaderPartition(
                    me, state, replica.log, now_ms=self.now(), replica_lag_time_max_ms=LAG_MAX_MS
                )
                replica.leader = machine
                self.note(f"{me} leads p{state.partition} epoch {state.leader_epoch}")
            self._carry_out(broker, replica, machine.on_state(state, self.now()))
            return
        if replica.leader is not None:
            replica.leader.on_state(state, self.now())
            replica.leader = None
        follower = replica.follower
        if state.leader == NO_LEADER:
            self._retire_follower(broker, replica)
        elif follower is None or (follower.leader_id, follower.leader_epoch) != (
            state.leader,
            state.leader_epoch,
        ):
            self._retire_follower(broker, replica)
            follower = FollowerPartition(me, state, replica.log)
            replica.follower = follower
            broker.sessions.setdefault(state.leader, FetchSession()).add(follower)

    def _retire_follower(self, broker: Broker, replica: Replica) -> None:
        follower = replica.follower
        if follower is not None:
            broker.sessions[follower.leader_id].remove(TOPIC, replica.partition)
            replica.follower = None

    def _catch_up_metadata(self, broker: Broker) -> None:
        """A (re)started or reconnected broker reads the current states."""
        for state in self.states.values():
            self._apply_state(broker, state)

    # --- time and faults -------------------------------------------------------------------

    def tick(self, ms: int) -> None:
        self.clock.advance(ms / 1000)
        for broker in self.brokers.values():
            if broker.alive:
                for replica in broker.replicas.values():
                    if replica.leader is not None:
                        self._carry_out(broker, replica, replica.leader.tick(self.now()))

    def checkpoint(self, broker_id: int) -> None:
        """The log manager's periodic checkpoint (recovery point, log start, HW) on disk."""
        broker = self.brokers[broker_id]
        if broker.alive:
            for replica in broker.replicas.values():
                replica.log.write_checkpoint()

    def crash(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.alive = False
        for replica in broker.replicas.values():
            replica.log.close_without_marker()
            replica.leader = replica.follower = None
        broker.sessions = {}
        self.zombies.discard(broker_id)
        self.note(f"crash {broker_id}")

    def expire(self, broker_id: int) -> None:
        """The lease of a crashed or cut-off broker ends; the controller reacts."""
        self.registered.discard(broker_id)
        self.note(f"lease of {broker_id} expired")
        self.reconcile()

    def restart(self, broker_id: int) -> None:
        """A new process: it registers only once the old one's lease is gone (``registration``
        waits for it), so the controller has moved leadership and ISR membership first."""
        if broker_id in self.registered:
            self.expire(broker_id)
        broker = self.brokers[broker_id]
        broker.incarnation += 1
        broker.replicas = self._open_replicas(broker_id)
        broker.alive = True
        self.note(f"restart {broker_id}: {[r.log for r in broker.replicas.values()]}")
        self.registered.add(broker_id)
        self.reconcile()
        self._catch_up_metadata(broker)

    def isolate(self, broker_id: int, *, from_etcd: bool = False) -> None:
        self.network.isolate(broker_id, BROKERS)
        if from_etcd:
            self.zombies.add(broker_id)
        self.note(f"isolate {broker_id}{' and from etcd' if from_etcd else ''}")

    def heal(self) -> None:
        self.network.heal()
        back, self.zombies = self.zombies, set()
        self.registered |= back
        self.reconcile()
        for broker_id in back:
            self._catch_up_metadata(self.brokers[broker_id])
        self.note("heal")

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.alive:
                for replica in broker.replicas.values():
                    replica.log.close_without_marker()


def _initial_state(partition: int) -> PartitionState:
    replicas = tuple(BROKERS[(partition + i) % len(BROKERS)] for i in range(len(BROKERS)))
    return PartitionState(
        topic=TOPIC, partition=partition, leader=replicas[0], replicas=replicas, isr=replicas
    )
