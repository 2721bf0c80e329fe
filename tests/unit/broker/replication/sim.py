"""A deterministic simulation of one replicated partition: the real machines, real logs.

Three brokers each hold a real ``Log`` in a temp folder and run the replication machines the
broker runs (``LeaderPartition``, ``FollowerPartition`` in a ``FetchSession``), with roles set
from a simulated controller exactly as ``ReplicaManager`` sets them. What is simulated:

- the **network**: an in-memory queue of messages; a step delivers one (chosen by the seeded
  random generator, so messages reorder), drops one, or isolates/heals a broker (everything to
  or from an isolated broker is dropped);
- the **controller** (the rules of ``yak_coordinator.reconcile``): a crashed broker's lease
  expires → it leaves the ISR (never emptying it) and, if it led, the first live ISR member in
  replica order leads with ``leader_epoch + 1``; a returning ISR member of a leaderless
  partition leads; the leader's ISR proposals are applied by compare-and-swap on
  ``partition_epoch``. Metadata reaches each broker as a message too (it can be late);
- **time**: a fake clock moved by ``tick`` steps; leaders are ticked (ISR shrink by lag);
- **crashes**: a broker loses its machines and reopens its log from disk (a process crash:
  the page cache survives, as with kill -9 — not a power loss).

Producers write uniquely-valued batches to whoever the producer last learned leads;
acks=all with ``min.insync.replicas`` 2 is acknowledged when that leader's high watermark
passes the batch while it still leads that epoch. ``check()`` asserts the invariants of
docs/replication.md after every step. Everything is driven by one ``random.Random(seed)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yak.clock import FakeClock
from yak.errors import YakError
from yak.metadata.models import NO_LEADER, PartitionState
from yak.record import RecordInput, decode_batches, encode_batch
from yak_broker.replication.fetch_session import FetchRound, FetchSession
from yak_broker.replication.follower_partition import FollowerPartition, FollowerStatus
from yak_broker.replication.leader_partition import LeaderPartition
from yak_broker.replication.messages import (
    NOT_LEADER_OR_FOLLOWER,
    AlterIsr,
    EpochAnswer,
    FetchAnswer,
)
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import LogConfig

TOPIC = "sim"
BROKERS = (0, 1, 2)
MIN_INSYNC = 2
LAG_MAX_MS = 3_000
CONFIG = LogConfig(segment_bytes=4096)  # small segments: rolls and multi-segment reads


@dataclass
class Broker:
    broker_id: int
    log: Log
    state: PartitionState | None = None  # the metadata this broker last received
    leader: LeaderPartition | None = None
    follower: FollowerPartition | None = None
    session: FetchSession = field(default_factory=FetchSession)
    alive: bool = True
    hw_seen: tuple[int, int] = (-1, -1)  # (leader epoch, HW) while leading


@dataclass
class Message:
    src: int
    dst: int
    kind: str
    body: Any


class Simulation:
    def __init__(self, seed: int, folder: Path) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = FakeClock()
        self.folder = folder
        self.brokers = {b: Broker(b, self._open(b)) for b in BROKERS}
        self.state = PartitionState(
            topic=TOPIC, partition=0, leader=0, leader_epoch=0, replicas=BROKERS, isr=BROKERS
        )
        self.lease_expired: set[int] = set()
        self.isolated: set[int] = set()
        self.network: list[Message] = []
        self.acked: dict[int, bytes] = {}  # offset -> value of every acks=all record acknowledged
        self.pending: list[tuple[int, int, int, int, bytes]] = []  # broker, epoch, offset, end, v
        self.next_value = 0
        self.trace: list[str] = []
        for broker in self.brokers.values():
            self._deliver_state(broker, self.state)

    # --- plumbing ------------------------------------------------------------------------

    def _open(self, broker_id: int) -> Log:
        return Log.open(self.folder / f"b{broker_id}" / "sim-0", CONFIG, self.clock)

    def now(self) -> int:
        return self.clock.time_ms()

    def send(self, src: int, dst: int, kind: str, body: Any) -> None:
        """Broker-to-broker messages are lost across an isolation; metadata (etcd) is not."""
        if dst != -1 and (src in self.isolated or dst in self.isolated):
            return
        self.network.append(Message(src, dst, kind, body))

    def publish(self, state: PartitionState) -> None:
        """The controller committed ``state``: every broker hears of it, maybe late."""
        self.state = state
        for broker in BROKERS:
            self.network.append(Message(-1, broker, "state", state))

    # --- roles (as ReplicaManager._host does) ---------------------------------------------

    def _deliver_state(self, broker: Broker, state: PartitionState) -> None:
        if not broker.alive:
            return
        if broker.state is not None and (state.leader_epoch, state.partition_epoch) < (
            broker.state.leader_epoch,
            broker.state.partition_epoch,
        ):
            return  # an older state arriving late
        broker.state = state
        if state.leader == broker.broker_id:
            if broker.follower is not None:
                broker.session.remove(TOPIC, 0)
                broker.follower = None
            if broker.leader is None or broker.leader.leader_epoch != state.leader_epoch:
                broker.leader = LeaderPartition(
                    broker.broker_id,
                    state,
                    broker.log,
                    now_ms=self.now(),
                    replica_lag_time_max_ms=LAG_MAX_MS,
                )
            self._leader_outputs(broker, broker.leader.on_state(state, self.now()))
            return
        broker.leader = None
        if state.leader == NO_LEADER:
            broker.session.remove(TOPIC, 0)
            broker.follower = None
            return
        machine = broker.follower
        if machine is None or (machine.leader_id, machine.leader_epoch) != (
            state.leader,
            state.leader_epoch,
        ):
            broker.follower = FollowerPartition(broker.broker_id, state, broker.log)
            broker.session.add(broker.follower)

    def _leader_outputs(self, broker: Broker, outputs: list[Any]) -> None:
        for output in outputs:
            if isinstance(output, AlterIsr):
                self.send(broker.broker_id, -1, "alter_isr", output)

    # --- steps ---------------------------------------------------------------------------

    def step(self) -> None:
        actions = [
            (self.produce, 8),
            (self.fetch_round, 12),
            (self.deliver, 24),
            (self.drop, 1),
            (self.tick, 3),
            (self.crash, 0.6),
            (self.restart, 1.5),
            (self.isolate, 0.5),
            (self.heal, 1),
        ]
        action = self.rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        action()
        self._complete_pending()

    def produce(self) -> None:
        acks_all = self.rng.random() < 0.7
        # Mostly the leader the metadata names; sometimes a stale one.
        target = self.state.leader if self.rng.random() < 0.8 else self.rng.choice(BROKERS)
        broker = self.brokers.get(target, self.brokers[0])
        value = f"v{self.next_value}".encode()
        self.next_value += 1
        machine = broker.leader if target in self.brokers else None
        if not broker.alive or machine is None or target in self.isolated:
            return
        if acks_all:
            try:
                machine.check_acks_all(MIN_INSYNC)
            except YakError:
                self.trace.append(f"produce {value!r} refused: ISR {machine.isr}")
                return
        batch = encode_batch([RecordInput(value=value, timestamp=0)])
        info = broker.log.append(batch, machine.leader_epoch)
        outputs = machine.on_append(self.now())
        self._leader_outputs(broker, outputs)
        end = info.last_offset + 1
        self.trace.append(f"produce {value!r} at {info.first_offset} on {target}")
        if acks_all:
            self.pending.append((target, machine.leader_epoch, info.first_offset, end, value))

    def _complete_pending(self) -> None:
        still = []
        for broker_id, epoch, offset, end, value in self.pending:
            broker = self.brokers[broker_id]
            machine = broker.leader
            if not broker.alive or machine is None or machine.leader_epoch != epoch:
                continue  # the producer gets NOT_LEADER_OR_FOLLOWER: not acknowledged
            if broker.log.high_watermark >= end:
                self.acked[offset] = value
                self.trace.append(f"ack {value!r} at {offset}")
            else:
                still.append((broker_id, epoch, offset, end, value))
        self.pending = still

    def fetch_round(self) -> None:
        broker = self.brokers[self.rng.choice(BROKERS)]
        if not broker.alive or broker.follower is None:
            return
        round_ = broker.session.build()
        if round_:
            self.send(broker.broker_id, broker.follower.leader_id, "fetch", round_)

    def deliver(self) -> None:
        if not self.network:
            return
        message = self.network.pop(self.rng.randrange(len(self.network)))
        if message.dst == -1:
            self._controller(message)
            return
        broker = self.brokers[message.dst]
        if not broker.alive:
            return
        if message.kind == "state":
            self._deliver_state(broker, message.body)
        elif message.kind == "fetch":
            self._serve_fetch(broker, message.src, message.body)
        elif message.kind == "fetch_answer":
            round_, epoch_answers, fetch_answers = message.body
            before = broker.log.log_end_offset
            broker.session.on_epoch_answers(round_, epoch_answers)
            if broker.log.log_end_offset < before:
                self.trace.append(
                    f"truncate {broker.broker_id}: {before} -> {broker.log.log_end_offset}"
                )
            broker.session.on_fetch_answers(round_, fetch_answers)

    def _serve_fetch(self, leader: Broker, follower_id: int, round_: FetchRound) -> None:
        """The leader's side of offsets-for-leader-epoch and fetch (as fetcher.py does)."""
        machine = leader.leader
        epoch_answers = []
        for query in round_.epoch_queries():
            if machine is None:
                epoch_answers.append(EpochAnswer(TOPIC, 0, error=NOT_LEADER_OR_FOLLOWER))
                continue
            try:
                epoch, end = machine.answer_epoch_query(
                    query.current_leader_epoch, query.leader_epoch
                )
                epoch_answers.append(EpochAnswer(TOPIC, 0, epoch, end))
            except YakError as exc:
                epoch_answers.append(EpochAnswer(TOPIC, 0, error=exc.code))
        fetch_answers = []
        for position in round_.fetch_positions():
            if machine is None:
                fetch_answers.append(FetchAnswer(TOPIC, 0, error=NOT_LEADER_OR_FOLLOWER))
                continue
            try:
                machine.check_epoch(position.current_leader_epoch)
                outputs = machine.on_follower_fetch(follower_id, position.fetch_offset, self.now())
                self._leader_outputs(leader, outputs)
                data = leader.log.read(
                    position.fetch_offset, self.rng.choice((200, 100_000)), FetchIsolation.LOG_END
                )
                fetch_answers.append(
                    FetchAnswer(
                        TOPIC,
                        0,
                        leader.log.high_watermark,
                        leader.log.log_start_offset,
                        bytes(data.records),
                    )
                )
            except YakError as exc:
                fetch_answers.append(
                    FetchAnswer(
                        TOPIC,
                        0,
                        leader.log.high_watermark,
                        leader.log.log_start_offset,
                        error=exc.code,
                    )
                )
        self.send(
            leader.broker_id, follower_id, "fetch_answer", (round_, epoch_answers, fetch_answers)
        )

    def _controller(self, message: Message) -> None:
        proposal: AlterIsr = message.body
        state = self.state
        if (state.leader, state.leader_epoch, state.partition_epoch) != (
            proposal.leader_id,
            proposal.leader_epoch,
            proposal.expected_partition_epoch,
        ):
            # The CAS lost: the leader learns of it (the driver calls on_proposal_failed).
            leader = self.brokers[proposal.leader_id]
            if leader.leader is not None and leader.leader.pending == proposal:
                leader.leader.on_proposal_failed()
            return
        isr = tuple(b for b in proposal.new_isr if b not in self.lease_expired) or (state.leader,)
        self.trace.append(f"ISR {state.isr} -> {isr}")
        self.publish(
            state.model_copy(update={"isr": isr, "partition_epoch": state.partition_epoch + 1})
        )

    def drop(self) -> None:
        """Lose a broker-to-broker message (etcd writes and watches are not lost)."""
        droppable = [i for i, m in enumerate(self.network) if m.kind in ("fetch", "fetch_answer")]
        if droppable:
            self.network.pop(self.rng.choice(droppable))

    def tick(self) -> None:
        self.clock.advance(self.rng.choice((0.01, 0.1, 0.6)))
        for broker in self.brokers.values():
            if broker.alive and broker.leader is not None:
                self._leader_outputs(broker, broker.leader.tick(self.now()))

    def crash(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive]
        if len(alive) <= 1:
            return
        broker = self.rng.choice(alive)
        broker.alive = False
        broker.leader = broker.follower = None
        broker.session = FetchSession()
        broker.state = None
        broker.log.close_without_marker()
        self.trace.append(f"crash {broker.broker_id}")
        self._expire(broker.broker_id)

    def _expire(self, broker_id: int) -> None:
        """The broker's lease expired: the controller reacts (reconcile's rules)."""
        self.lease_expired.add(broker_id)
        state = self.state
        isr = tuple(b for b in state.isr if b != broker_id) or (state.isr[0],)
        leader = state.leader
        if leader == broker_id:
            live = [b for b in state.replicas if b in isr and b not in self.lease_expired]
            leader = live[0] if live else NO_LEADER
        if (leader, isr) == (state.leader, state.isr):
            return
        self.publish(
            state.model_copy(
                update={
                    "leader": leader,
                    "isr": isr,
                    "leader_epoch": state.leader_epoch + (leader != state.leader),
                    "partition_epoch": state.partition_epoch + 1,
                }
            )
        )
        self.trace.append(f"controller: leader {leader} ISR {isr}")

    def restart(self) -> None:
        dead = [b for b in self.brokers.values() if not b.alive]
        if not dead:
            return
        broker = self.rng.choice(dead)
        broker.log = self._open(broker.broker_id)
        broker.alive = True
        broker.hw_seen = (-1, -1)
        self.lease_expired.discard(broker.broker_id)
        self.trace.append(f"restart {broker.broker_id} (log end {broker.log.log_end_offset})")
        state = self.state
        if state.leader == NO_LEADER and broker.broker_id in state.isr:
            self.publish(
                state.model_copy(
                    update={
                        "leader": broker.broker_id,
                        "leader_epoch": state.leader_epoch + 1,
                        "partition_epoch": state.partition_epoch + 1,
                    }
                )
            )
        else:
            self._deliver_state(broker, state)

    def isolate(self) -> None:
        if not self.isolated:
            self.isolated.add(self.rng.choice(BROKERS))

    def heal(self) -> None:
        self.isolated.clear()

    # --- invariants ----------------------------------------------------------------------

    def records(self, broker: Broker) -> dict[int, tuple[int, bytes]]:
        """offset -> (batch leader epoch, value) of every record in the broker's log."""
        log = broker.log
        out: dict[int, tuple[int, bytes]] = {}
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
            if not data.records:
                break
            for batch in decode_batches(data.records):
                epoch = batch.header.partition_leader_epoch
                for record in batch.records:
                    out[record.offset] = (epoch, bytes(record.value or b""))
                offset = batch.header.base_offset + batch.header.last_offset_delta + 1
        return out

    def check(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive]
        logs = {b.broker_id: self.records(b) for b in alive}
        leader = self.brokers.get(self.state.leader)
        # 1. No acks=all record is lost or moved: the current leader holds each at its offset.
        if leader is not None and leader.alive and leader.leader is not None:
            held = logs[leader.broker_id]
            for offset, value in self.acked.items():
                assert held.get(offset, (0, b""))[1] == value, (
                    f"acknowledged {value!r} at {offset} missing on leader {leader.broker_id}"
                )
        # 2. Replicas agree below their high watermarks.
        for a in alive:
            for b in alive:
                if a.broker_id < b.broker_id:
                    below = min(a.log.high_watermark, b.log.high_watermark)
                    for offset in range(below):
                        assert logs[a.broker_id].get(offset) == logs[b.broker_id].get(offset), (
                            f"brokers {a.broker_id} and {b.broker_id} differ at {offset} "
                            f"(below HW {below})"
                        )
        # 3. A leader's high watermark never goes back within its leader epoch.
        for broker in alive:
            if broker.leader is not None:
                epoch, hw = broker.leader.leader_epoch, broker.log.high_watermark
                seen_epoch, seen_hw = broker.hw_seen
                if seen_epoch == epoch:
                    assert hw >= seen_hw, f"leader {broker.broker_id} HW {seen_hw} -> {hw}"
                broker.hw_seen = (epoch, hw)
        # 4. A follower done truncating for the live leader holds a prefix of its log.
        for broker in alive:
            machine = broker.follower
            if (
                machine is not None
                and machine.status is FollowerStatus.FETCHING
                and leader is not None
                and leader.alive
                and leader.leader is not None
                and (machine.leader_id, machine.leader_epoch)
                == (leader.broker_id, leader.leader.leader_epoch)
            ):
                mine, theirs = logs[broker.broker_id], logs[leader.broker_id]
                for offset, entry in mine.items():
                    assert theirs.get(offset) == entry, (
                        f"follower {broker.broker_id} diverges from leader {leader.broker_id} "
                        f"at {offset}: {entry} vs {theirs.get(offset)}"
                    )

    def settle(self) -> None:
        """Heal everything, restart the dead, and let replication converge (no faults)."""
        self.isolated.clear()
        while any(not b.alive for b in self.brokers.values()):
            self.restart()
        for _ in range(400):
            if self.network:
                self.deliver()
            else:
                self.fetch_round()
                if self.rng.random() < 0.05:
                    self.tick()
            self._complete_pending()
            self.check()

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.alive:
                broker.log.close_without_marker()
