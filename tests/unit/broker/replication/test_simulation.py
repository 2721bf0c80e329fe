"""Seeded random schedules on a simulated cluster (``sim_cluster``): produce (acks=all and
acks=1), fetch rounds, message loss, duplication and reordering, cut links, isolated and zombie
brokers, crashes and restarts (some on an empty data folder, some racing the old lease: see
``sim_cluster``), lease expiries, clock ticks, and for fetch sessions (KIP-227)
rounds given up and sessions evicted. Each seed picks how followers fetch (``sim_fetch.Mode``):
sessionless rounds, incremental fetch sessions, or sessions against a mix of leader processes
with and without them. The invariants (``sim_invariants``, and the session checks of
``sim_fetch``) are checked after every step; at the end the cluster is healed and must converge.

``YAK_SIM_SEED=<n>`` replays one seed (its trace is printed on failure); ``YAK_SIM_SEEDS=<count>``
runs another number of seeds than the suite's 200; ``YAK_SIM_STEPS`` sets the schedule length.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.broker.replication.sim_cluster import BROKERS, Cluster
from tests.unit.broker.replication.sim_fetch import Mode
from tests.unit.broker.replication.sim_invariants import Checker
from yak.metadata.models import NO_LEADER

STEPS = int(os.environ.get("YAK_SIM_STEPS", "200"))
_ONE = os.environ.get("YAK_SIM_SEED")
SEEDS = [int(_ONE)] if _ONE else list(range(int(os.environ.get("YAK_SIM_SEEDS", "200"))))

#: What the schedules did, over every seed run in this session (see the last test).
COVERAGE: Counter[str] = Counter()


class Schedule:
    """Random operations on one cluster, all drawn from one seeded generator."""

    def __init__(self, seed: int, folder: Path) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        partitions = self.rng.randint(1, 3)
        mode = self.rng.choice((Mode.SESSIONLESS, Mode.SESSIONS, Mode.SESSIONS, Mode.MIXED))
        self.cluster = Cluster(folder, partitions, self.rng, mode)
        self.checker = Checker(self.cluster)
        rng = self.rng
        # Each seed gets its own mix: how busy producers and fetchers are, how often faults
        # strike, and maybe one broker whose messages are slow to arrive.
        faults = rng.uniform(0.3, 2)
        self.slow = rng.choice((None, None, *BROKERS))
        self.actions: list[tuple[Callable[[], None], float]] = [
            (self.produce, rng.uniform(4, 12)),
            (self.fetch, rng.uniform(4, 16)),
            (self.deliver, 30),
            (self.drop, faults),
            (self.duplicate, 0.5 * faults),
            (self.give_up, 0.5 * faults),
            (self.evict, 0.3 * faults),
            (self.tick, 4),
            (self.checkpoint, 1),
            (self.crash, faults),
            (self.restart, 1.5),
            (self.expire, 2),
            (self.announce, 1),
            (self.cut, 0.4 * faults),
            (self.isolate, 0.4 * faults),
            (self.zombie, 0.5 * faults),
            (self.heal, 0.7),
        ]

    def run(self, steps: int) -> None:
        for step in range(steps):
            action = self.rng.choices(*zip(*self.actions, strict=True))[0]
            self.check(f"step {step} ({action.__name__})", action)
        self.settle()

    def check(self, where: str, action: Callable[[], None] | None = None) -> None:
        try:
            if action is not None:
                action()
            self.checker.check()
        except AssertionError as exc:
            trace = "\n".join(self.cluster.trace[-50:])
            raise AssertionError(
                f"seed {self.seed}, {where}: {exc}\nreplay: YAK_SIM_SEED={self.seed}\n{trace}"
            ) from exc

    # --- actions -------------------------------------------------------------------------

    def produce(self) -> None:
        cluster, rng = self.cluster, self.rng
        partition = rng.choice(cluster.partitions)
        leader = cluster.states[partition].leader
        # Mostly to the leader the metadata names; sometimes to a broker with stale metadata.
        target = leader if leader != NO_LEADER and rng.random() < 0.85 else rng.choice(BROKERS)
        acks_all = rng.random() < 0.7
        answer = cluster.produce(partition, target, acks_all=acks_all, records=rng.randint(1, 3))
        COVERAGE[f"produce {answer}"] += 1

    def fetch(self) -> None:
        rounds = self.cluster.fetch_rounds()
        if rounds:
            self.cluster.fetch_round(*self.rng.choice(rounds))

    def deliver(self) -> None:
        self.cluster.deliver(self.cluster.network.take(self.rng, self.slow))

    def drop(self) -> None:
        self.cluster.network.drop(self.rng)

    def duplicate(self) -> None:
        self.cluster.network.duplicate(self.rng)

    def give_up(self) -> None:
        """A follower's connection to its leader breaks: its round in flight is given up."""
        cluster = self.cluster
        waiting = [
            (broker, fetcher)
            for broker in cluster.brokers.values()
            if broker.alive
            for fetcher in broker.fetchers.values()
            if fetcher.in_flight is not None
        ]
        if waiting:
            cluster.fetching.time_out(*self.rng.choice(waiting), "connection broke")

    def evict(self) -> None:
        self.cluster.fetching.evict(self.rng.choice(BROKERS), self.rng)

    def tick(self) -> None:
        self.cluster.tick(self.rng.choice((10, 100, 600, 1500)))

    def checkpoint(self) -> None:
        self.cluster.checkpoint(self.rng.choice(BROKERS))

    def crash(self) -> None:
        alive = [b for b, broker in self.cluster.brokers.items() if broker.alive]
        if len(alive) > 1:
            self.cluster.crash(self.rng.choice(alive))

    def restart(self) -> None:
        cluster, rng = self.cluster, self.rng
        dead = [b for b, broker in cluster.brokers.items() if not broker.alive]
        if dead:
            broker_id = rng.choice(dead)
            wipe = rng.random() < 0.3 and cluster.can_wipe(broker_id)
            race = rng.choice((None, None, "early", "coalesced"))
            cluster.restart(broker_id, wipe=wipe, race=race)

    def expire(self) -> None:
        cluster = self.cluster
        gone = [
            b
            for b in sorted(cluster.registered)
            if not cluster.brokers[b].alive or b in cluster.zombies or b in cluster.pending
        ]
        if gone:
            cluster.expire(self.rng.choice(gone))

    def announce(self) -> None:
        waiting = sorted(self.cluster.pending)
        if waiting:
            self.cluster.announce(self.rng.choice(waiting))

    def cut(self) -> None:
        a, b = self.rng.sample(BROKERS, 2)
        self.cluster.network.cut_link(a, b)

    def isolate(self) -> None:
        self.cluster.isolate(self.rng.choice(BROKERS))

    def zombie(self) -> None:
        alive = [b for b, broker in self.cluster.brokers.items() if broker.alive]
        self.cluster.isolate(self.rng.choice(alive), from_etcd=True)

    def heal(self) -> None:
        self.cluster.heal()

    # --- the end ---------------------------------------------------------------------------

    def settle(self) -> None:
        """Heal, restart the dead, then fault-free rounds until every replica holds the
        leader's whole log, committed, with every replica back in the ISR."""
        cluster = self.cluster
        cluster.heal()
        for broker_id in sorted(cluster.pending):  # their old leases run out
            cluster.expire(broker_id)
        for broker_id, broker in cluster.brokers.items():
            if not broker.alive:
                cluster.restart(broker_id)
        for attempt in range(60):
            if attempt == 10:
                self.recover_lost_partitions()
            cluster.deliver_all()
            cluster.fetching.time_out_lost_rounds()
            for broker_id, leader_id in cluster.fetch_rounds():
                cluster.fetch_round(broker_id, leader_id)
            cluster.deliver_all()
            cluster.tick(200)
            self.check(f"settling, round {attempt}", cluster.deliver_all)
            if self.converged():
                break
        else:
            raise AssertionError(f"seed {self.seed}: no convergence\nYAK_SIM_SEED={self.seed}")
        for p in cluster.partitions:
            state = cluster.states[p]
            leader = self.checker.contents(cluster.brokers[state.leader].replicas[p])
            for broker in cluster.brokers.values():
                assert self.checker.contents(broker.replicas[p]) == leader
            for offset, batch_id in cluster.acked[p].items():
                assert leader[offset][1] == batch_id, f"seed {self.seed}: lost #{batch_id}"

    def recover_lost_partitions(self) -> None:
        """A partition whose only ISR members lost their logs waits offline (a wiped broker was
        elected while its old lease still lived, then the others died): no data is lost, but
        only the operator can bring it back. As docs/operations.md says, with an unclean
        election of a replica that holds the data — one must hold every acknowledged batch."""
        cluster = self.cluster
        for p in cluster.partitions:
            state = cluster.states[p]
            if state.leader != NO_LEADER or not all(cluster.lost(state, m) for m in state.isr):
                continue
            acked = cluster.acked[p]
            holders = [
                b
                for b in state.replicas
                if not cluster.lost(state, b)
                and all(
                    self.checker.contents(cluster.brokers[b].replicas[p]).get(offset, (0, -1))[1]
                    == batch
                    for offset, batch in acked.items()
                )
            ]
            assert holders, f"seed {self.seed}: p{p} offline and acknowledged batches lost"
            COVERAGE["offline after losing the last in-sync log"] += 1
            cluster.unclean_election(p, holders[0])

    def converged(self) -> bool:
        cluster = self.cluster
        for p in cluster.partitions:
            state = cluster.states[p]
            if state.leader == NO_LEADER or set(state.isr) != set(state.replicas):
                return False
            leader = cluster.brokers[state.leader].replicas[p]
            end = leader.log.log_end_offset
            if leader.leader is None or leader.leader.leader_epoch != state.leader_epoch:
                return False
            for broker in cluster.brokers.values():
                log = broker.replicas[p].log
                if (log.log_end_offset, log.high_watermark) != (end, end):
                    return False
        return True


def run(seed: int, folder: Path) -> Schedule:
    schedule = Schedule(seed, folder)
    try:
        schedule.run(STEPS)
    finally:
        schedule.cluster.close()
    return schedule


@pytest.mark.parametrize("seed", SEEDS)
def test_random_schedule_keeps_the_invariants(seed: int, tmp_path: Path) -> None:
    schedule = run(seed, tmp_path)
    cluster = schedule.cluster
    COVERAGE["seeds"] += 1
    COVERAGE["leader epochs"] += sum(s.leader_epoch for s in cluster.states.values())
    COVERAGE["acked batches"] += sum(len(b) for b in cluster.acked_batches.values())
    COVERAGE[f"mode {cluster.fetching.mode.value}"] += 1
    COVERAGE.update(cluster.fetching.counts)
    for line in cluster.trace:
        for word in (
            "truncate",
            "crash",
            "and from etcd",
            "expired",
            "AlterIsr",
            "wiped",
            "early race",
            "coalesced race",
            "announces data folder",
            "its log was lost",
        ):
            COVERAGE[word] += word in line


def test_the_schedules_exercise_failover_and_truncation() -> None:
    """The random schedules are not vacuous (counted over the seeds run above)."""
    if COVERAGE["seeds"] < 50:
        pytest.skip("fewer than 50 seeds ran in this session")
    seeds = COVERAGE["seeds"]
    # Per seed on average: ~5 leader epochs, ~5 acknowledged batches, ~1 truncation.
    assert COVERAGE["leader epochs"] >= 3 * seeds, COVERAGE
    assert COVERAGE["acked batches"] >= 3 * seeds, COVERAGE
    assert COVERAGE["truncate"] >= seeds // 2, COVERAGE
    assert COVERAGE["and from etcd"] >= seeds // 2, COVERAGE
    assert COVERAGE["AlterIsr"] >= 3 * seeds, COVERAGE
    assert COVERAGE["produce NOT_ENOUGH_REPLICAS"] > 0, COVERAGE
    # Empty-disk restarts, and both races with the old registration.
    assert COVERAGE["wiped"] >= seeds // 4, COVERAGE
    assert COVERAGE["early race"] > 0, COVERAGE
    assert COVERAGE["coalesced race"] > 0, COVERAGE
    assert COVERAGE["announces data folder"] > 0, COVERAGE
    assert COVERAGE["its log was lost"] > 0, COVERAGE
    # Fetch sessions: refused and given-up sessions start over, idle rounds, late answers,
    # evictions, and leaders without sessions all happen.
    for what in (
        "session refused 70",
        "full round after refusal or no answer",
        "idle round answered nothing",
        "late answer dropped",
        "session evicted",
        "answered by a leader without sessions",
    ):
        assert COVERAGE[what] > 0, (what, COVERAGE)
