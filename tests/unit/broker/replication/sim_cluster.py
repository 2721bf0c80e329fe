"""A simulated Yak cluster for replication tests: three brokers on real logs, one controller.

Each broker holds a real ``Log`` per partition in a temp folder and runs the machines the broker
runs (``LeaderPartition``; ``FollowerPartition`` in one ``FetchSession`` per leader broker),
given roles from metadata exactly as ``ReplicaManager`` gives them. Simulated around them:

- the **network** (``sim_network``): fetch rounds and answers, lost in cuts or at random,
  sometimes duplicated; metadata and ISR proposals are etcd traffic — delayed and reordered,
  never lost;
- the **fetch path** (``sim_fetch``): followers' rounds with or without incremental fetch
  sessions (``Mode``, chosen per run), the leaders' reads and their ``FetchSessionCache`` with
  parked long polls, session eviction, rounds given up after a timeout;
- the **controller**: ``yak_coordinator.decisions.partition_plan.next_partition_state`` over
  the registered brokers (election of the first live ISR member in replica order, dead brokers
  out of the ISR without emptying it, preferred leader back), and the leaders' ``AlterIsr``
  applied by compare-and-swap on ``partition_epoch`` (the broker's ``isr_writer``), fenced by the
  proposing process's registration: a proposal lands only while the registration is the one
  that process wrote (``holders``: same incarnation, same folder) — an older process's
  proposal still in flight when a newer one registered or announced its folder is refused;
- **time**: a ``FakeClock`` moved only by ``tick``; leaders are ticked then (ISR shrink by lag);
- **faults**: ``crash`` (a process crash: machines gone, logs reopened from disk by
  ``restart``; the page cache survives, so no fsynced-or-not distinction), ``expire`` (the
  crashed or cut-off broker's lease ends: the controller reacts; a restart waits for it, as the
  broker's registrar does), cut links, ``isolate`` (from every broker) and ``isolate`` with
  ``from_etcd`` (a zombie: its proposals fail, it hears no metadata until healed);
- **empty-disk restarts** (issue 21): ``restart(wipe=True)`` starts the broker on an empty data
  folder with a new folder id (``meta.properties``' ``directory.id``), which its fetches carry
  and its registration names (``registered``: broker → folder id). Two races come with it:
  ``race="early"`` — the new process serves (leads, follows) while its old registration is
  still there, as the real broker does while its registrar waits for the old lease: it
  registers at the next ``expire``, and may ``announce`` its folder on the old registration
  before (``registration.announce_log_dir``); ``race="coalesced"`` — the controller sees the
  new registration without having seen the old one go (events coalesced, a failover).

Producers' batches carry a unique batch id in their timestamp (``BASE_TS + id``), so logs are
compared by batch headers alone. An acks=all batch is acknowledged when its leader machine emits
``HighWatermarkAdvanced`` past it while still leading; ``acked`` records offset → batch id.
Every operation is synchronous and deterministic given the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.unit.broker.replication.sim_fetch import Fetcher, FetchPath, LeaderSessions, Mode
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
    Wake,
)
from yak.clock import FakeClock
from yak.errors import NotEnoughReplicasError
from yak.metadata.models import NO_LEADER, PartitionState
from yak.record import RecordInput, encode_batch
from yak_broker.replication.isr_writer import altered_state
from yak_broker.replication.state.follower_partition import FollowerPartition
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import (
    AlterIsr,
    HighWatermarkAdvanced,
    LeaderOutput,
)
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import LogConfig
from yak_coordinator.decisions.partition_plan import next_partition_state

TOPIC = "sim"
BROKERS = (0, 1, 2)
MIN_INSYNC = 2
LAG_MAX_MS = 3_000
BASE_TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2048)  # small segments: rolls, reads that stop at a segment


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
    leading: LeaderSessions
    incarnation: int = 0
    alive: bool = True
    fetchers: dict[int, Fetcher] = field(default_factory=dict)  # by leader broker
    log_dir: str = ""  # the data folder's id: a new one after each wipe


@dataclass(frozen=True, eq=False)
class Waiting:
    """An acks=all batch waiting for its leader's high watermark."""

    partition: int
    machine: LeaderPartition
    batch_id: int
    first_offset: int
    end: int


class Cluster:
    def __init__(
        self, folder: Path, partitions: int, rng: random.Random, mode: Mode = Mode.SESSIONS
    ) -> None:
        self.folder = folder
        self.rng = rng
        self.fetching = FetchPath(self, mode)
        self.clock = FakeClock(BASE_TS)
        self.network = Network()
        self.partitions = tuple(range(partitions))
        self.states = {p: _initial_state(p) for p in self.partitions}
        #: Brokers with a live lease → the data folder id their registration names.
        self.registered: dict[int, str] = {b: _folder_id(b, 0) for b in BROKERS}
        #: Which process (incarnation) wrote each live registration: the ISR writes' fence.
        self.holders: dict[int, int] = dict.fromkeys(BROKERS, 0)
        #: Restarted processes whose registration waits for the old one's lease (``early``).
        self.pending: dict[int, str] = {}
        #: The data folder of each broker process, by (broker, incarnation).
        self.dirs: dict[tuple[int, int], str] = {(b, 0): _folder_id(b, 0) for b in BROKERS}
        self.wipes = dict.fromkeys(BROKERS, 0)
        self.zombies: set[int] = set()  # running, cut off from every broker and from etcd
        self.acked: dict[int, dict[int, int]] = {p: {} for p in self.partitions}
        self.acked_batches: dict[int, list[tuple[int, int]]] = {p: [] for p in self.partitions}
        self.waiting: list[Waiting] = []
        self.next_batch = 0
        self.trace: list[str] = []
        self.brokers = {
            b: Broker(b, self._open_replicas(b), self._leader_sessions(), log_dir=_folder_id(b, 0))
            for b in BROKERS
        }
        for broker in self.brokers.values():
            self._catch_up_metadata(broker)

    def _open_replicas(self, broker_id: int) -> dict[int, Replica]:
        return {
            p: Replica(
                p, Log.open(self.folder / f"b{broker_id}" / f"{TOPIC}-{p}", CONFIG, self.clock)
            )
            for p in self.partitions
        }

    def _leader_sessions(self) -> LeaderSessions:
        """A new broker process's sessions (``Mode.MIXED``: half the processes keep none)."""
        mode = self.fetching.mode
        supported = mode is Mode.SESSIONS or (mode is Mode.MIXED and self.rng.random() < 0.5)
        return LeaderSessions.new(supported, self.rng)

    def now(self) -> int:
        return self.clock.time_ms()

    def log_dir_of(self, broker_id: int, incarnation: int) -> str:
        """The data folder of that broker process (what its fetches carry)."""
        return self.dirs.get((broker_id, incarnation), "")

    def lost(self, state: PartitionState, broker_id: int) -> bool:
        """Whether ``broker_id`` is in ``state``'s ISR with a log its disk no longer holds."""
        return state.log_dir_lost(broker_id, self.brokers[broker_id].log_dir)

    def can_wipe(self, broker_id: int) -> bool:
        """The fault model of one lost disk: every partition keeps an ISR member besides
        ``broker_id`` whose log is intact (wiping the last one loses acknowledged data for
        real; ``test_scenarios`` shows that partition then waits offline)."""
        return all(
            any(m != broker_id and not self.lost(state, m) for m in state.isr)
            for state in self.states.values()
        )

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
        broker.leading.cache.notify((TOPIC, partition))  # wakes sessions (replica_manager)
        self.note(f"produce #{batch_id} p{partition} on {broker_id} at {info.first_offset}")
        if acks_all:
            end = info.last_offset + 1
            self.waiting.append(Waiting(partition, machine, batch_id, info.first_offset, end))
        self.carry_out(broker, replica, machine.on_append(self.now()))
        return "OK"

    # --- follower fetching (``sim_fetch``) -------------------------------------------------

    def fetch_round(self, broker_id: int, leader_id: int) -> bool:
        """``broker_id``'s fetcher for ``leader_id`` sends a round; False if it had nothing."""
        return self.fetching.fetch_round(broker_id, leader_id)

    def fetch_rounds(self) -> list[tuple[int, int]]:
        return self.fetching.fetch_rounds()

    # --- the leader's outputs, acks --------------------------------------------------------

    def carry_out(self, broker: Broker, replica: Replica, outputs: list[LeaderOutput]) -> None:
        for output in outputs:
            if isinstance(output, AlterIsr):
                machine = replica.leader
                assert machine is not None
                self.note(
                    f"propose p{output.partition} ISR {output.new_isr} from {broker.broker_id}"
                )
                self.send(broker, CONTROLLER, -1, Propose(output, machine))
            elif isinstance(output, HighWatermarkAdvanced):
                assert output.high_watermark == replica.log.high_watermark
                # Followers learn it at their session's next answer (replica_manager).
                broker.leading.cache.mark((TOPIC, replica.partition))
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

    def send(self, src: Broker, dst: int, dst_incarnation: int, body: Body) -> None:
        envelope = Envelope(src.broker_id, src.incarnation, dst, dst_incarnation, body)
        self.network.send(envelope)

    def deliver(self, envelope: Envelope | None) -> None:
        if envelope is None:
            return
        body = envelope.body
        if isinstance(body, Propose):
            # Delivered even when its process was restarted since (a write already on its way
            # to etcd): the registration fence is what refuses it.
            self._alter_isr(envelope, body)
            return
        broker = self.brokers[envelope.dst]
        if not broker.alive or broker.incarnation != envelope.dst_incarnation:
            return  # the process it was for is gone
        if isinstance(body, Metadata):
            if broker.broker_id not in self.zombies:
                self._apply_state(broker, body.state)
        elif isinstance(body, Fetch):
            self.fetching.serve(broker, envelope.src, envelope.src_incarnation, body)
        elif isinstance(body, FetchReply):
            self.fetching.on_reply(broker, body)
        elif isinstance(body, Wake):
            self.fetching.on_wake(broker, body)
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
                change = next_partition_state(self.states[p], live, log_dirs=self.registered)
                if change is None:
                    break
                self._publish(*change)

    def unclean_election(self, partition: int, broker_id: int) -> None:
        """The operator elects ``broker_id`` for an offline partition (accepting any loss)."""
        state = self.states[partition]
        after = state.model_copy(
            update={
                "leader": broker_id,
                "isr": (broker_id,),
                "isr_log_dirs": {broker_id: self.brokers[broker_id].log_dir},
                "leader_epoch": state.leader_epoch + 1,
                "partition_epoch": state.partition_epoch + 1,
            }
        )
        self._publish(after, "unclean leader election by the operator")

    def _alter_isr(self, envelope: Envelope, body: Propose) -> None:
        proposal = body.proposal
        state = self.states[proposal.partition]
        committed = None
        if self._fence_holds(envelope.src, envelope.src_incarnation) and (
            state.leader,
            state.leader_epoch,
            state.partition_epoch,
        ) == (proposal.leader_id, proposal.leader_epoch, proposal.expected_partition_epoch):
            assert proposal.leader_id in proposal.new_isr
            assert set(proposal.new_isr) <= set(state.replicas)
            committed = altered_state(state, proposal)
            self._publish(committed, "AlterIsr")
            self.reconcile()
        result = ProposeResult(proposal, body.machine, committed)
        self.network.send(Envelope(CONTROLLER, -1, envelope.src, envelope.src_incarnation, result))

    def _fence_holds(self, broker_id: int, incarnation: int) -> bool:
        """Whether ``broker_id``'s registration is still what process ``incarnation`` wrote
        (``isr_writer``'s fence), and that process reaches etcd."""
        if broker_id in self.zombies and self.brokers[broker_id].incarnation == incarnation:
            return False
        return self.holders.get(broker_id) == incarnation and self.registered.get(
            broker_id
        ) == self.dirs.get((broker_id, incarnation))

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
        if known is None or (known.leader, known.leader_epoch) != (
            state.leader,
            state.leader_epoch,
        ):  # parked session fetches re-check leadership (replica_manager)
            broker.leading.cache.notify((TOPIC, state.partition))
        me = broker.broker_id
        if state.leader == me and self.lost(state, me):
            # Named leader with a log this disk no longer holds: neither lead nor follow.
            self._retire_follower(broker, replica)
            if replica.leader is not None:
                replica.leader.on_state(state, self.now())
                replica.leader = None
            self.note(f"{me} does not lead p{state.partition}: its log was lost")
            return
        if state.leader == me:
            self._retire_follower(broker, replica)
            machine = replica.leader
            if machine is None or machine.leader_epoch != state.leader_epoch:
                if machine is not None:
                    machine.on_state(state, self.now())  # retires it
                machine = LeaderPartition(
                    me,
                    state,
                    replica.log,
                    now_ms=self.now(),
                    replica_lag_time_max_ms=LAG_MAX_MS,
                    log_dir_id=broker.log_dir,
                )
                replica.leader = machine
                self.note(f"{me} leads p{state.partition} epoch {state.leader_epoch}")
            self.carry_out(broker, replica, machine.on_state(state, self.now()))
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
            broker.fetchers.setdefault(state.leader, Fetcher(state.leader)).session.add(follower)

    def _retire_follower(self, broker: Broker, replica: Replica) -> None:
        follower = replica.follower
        if follower is not None:
            broker.fetchers[follower.leader_id].session.remove(TOPIC, replica.partition)
            replica.follower = None

    def _catch_up_metadata(self, broker: Broker) -> None:
        """A (re)started or reconnected broker reads the current states."""
        for state in self.states.values():
            self._apply_state(broker, state)

    # --- time and faults -------------------------------------------------------------------

    def tick(self, ms: int) -> None:
        self.clock.advance(ms / 1000)
        self.fetching.on_tick()
        for broker in self.brokers.values():
            if broker.alive:
                for replica in broker.replicas.values():
                    if replica.leader is not None:
                        self.carry_out(broker, replica, replica.leader.tick(self.now()))

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
        broker.fetchers = {}
        broker.leading = LeaderSessions.new(False, self.rng)  # its sessions are gone
        self.zombies.discard(broker_id)
        self.note(f"crash {broker_id}")

    def expire(self, broker_id: int) -> None:
        """The lease of a crashed or cut-off broker ends; the controller reacts. A restarted
        process waiting for it (``early``) registers then."""
        self.registered.pop(broker_id, None)
        self.holders.pop(broker_id, None)
        self.note(f"lease of {broker_id} expired")
        self.reconcile()
        waiting = self.pending.pop(broker_id, None)
        if waiting is not None:
            self.registered[broker_id] = waiting
            self.holders[broker_id] = self.brokers[broker_id].incarnation
            self.note(f"{broker_id} registered with data folder {waiting}")
            self.reconcile()

    def announce(self, broker_id: int) -> None:
        """A restarted process waiting for its old lease writes its new folder id into the old
        registration (same lease): the controller learns of the lost logs at once."""
        folder = self.pending.get(broker_id)
        if folder is not None and self.registered.get(broker_id, folder) != folder:
            self.registered[broker_id] = folder
            self.note(f"{broker_id} announces data folder {folder}")
            self.reconcile()

    def restart(self, broker_id: int, *, wipe: bool = False, race: str | None = None) -> None:
        """A new process, on an empty data folder if ``wipe``. It registers only once the old
        one's lease is gone (``registration`` waits for it), so the controller has moved
        leadership and ISR membership first — unless ``race`` (see the module doc)."""
        racing = race is not None and broker_id in self.registered
        if broker_id in self.registered and not racing:
            self.expire(broker_id)
        broker = self.brokers[broker_id]
        broker.incarnation += 1
        if wipe:
            shutil.rmtree(self.folder / f"b{broker_id}", ignore_errors=True)
            self.wipes[broker_id] += 1
            broker.log_dir = _folder_id(broker_id, self.wipes[broker_id])
        self.dirs[(broker_id, broker.incarnation)] = broker.log_dir
        broker.replicas = self._open_replicas(broker_id)
        broker.leading = self._leader_sessions()
        broker.alive = True
        how = f"{'wiped, ' if wipe else ''}{race + ' race, ' if racing and race else ''}"
        self.note(f"restart {broker_id} ({how}folder {broker.log_dir})")
        if racing and race == "early":
            self.pending[broker_id] = broker.log_dir
        else:
            self.registered[broker_id] = broker.log_dir
            self.holders[broker_id] = broker.incarnation
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
        for broker_id in back:
            if broker_id not in self.pending:
                self.registered[broker_id] = self.brokers[broker_id].log_dir
                self.holders[broker_id] = self.brokers[broker_id].incarnation
        self.reconcile()
        for broker_id in back:
            self._catch_up_metadata(self.brokers[broker_id])
        self.note("heal")

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.alive:
                for replica in broker.replicas.values():
                    replica.log.close_without_marker()


def _folder_id(broker_id: int, wipes: int) -> str:
    return f"dir{broker_id}.{wipes}"


def _initial_state(partition: int) -> PartitionState:
    replicas = tuple(BROKERS[(partition + i) % len(BROKERS)] for i in range(len(BROKERS)))
    return PartitionState(
        topic=TOPIC,
        partition=partition,
        leader=replicas[0],
        replicas=replicas,
        isr=replicas,
        isr_log_dirs={b: _folder_id(b, 0) for b in replicas},
    )
