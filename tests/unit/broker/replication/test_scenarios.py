"""Scripted fault scenarios on the simulated cluster (three brokers, real logs), the invariants
checked after every step: the KIP-101 cases, a zombie leader, ISR shrink and expansion, fencing.

Partition 0 has replicas (0, 1, 2): broker 0 leads epoch 0 and is the preferred leader. Each
script runs with sessionless rounds and with incremental fetch sessions (``sim_fetch.Mode``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.broker.replication.sim_cluster import LAG_MAX_MS, Cluster
from tests.unit.broker.replication.sim_fetch import MAX_WAIT_MS, Mode
from tests.unit.broker.replication.sim_invariants import Checker
from tests.unit.broker.replication.sim_network import Envelope, Metadata
from yak_broker.replication.state.follower_partition import FollowerStatus


class Script:
    def __init__(self, folder: Path, mode: Mode = Mode.SESSIONS) -> None:
        self.cluster = Cluster(folder, 1, random.Random(0), mode)
        self.checker = Checker(self.cluster)
        self.deliver()
        self.replicate(1)  # the followers find they have nothing to truncate: fetching now

    def deliver(self, held: Callable[[Envelope], bool] = lambda _: False) -> None:
        """Deliver every message in order (also those sent meanwhile), except ``held`` ones."""
        network, kept = self.cluster.network, []
        while network.queue:
            envelope = network.queue.pop(0)
            if held(envelope):
                kept.append(envelope)
            else:
                self.cluster.deliver(envelope)
                self.checker.check()
        network.queue[:0] = kept

    def replicate(
        self, rounds: int = 3, held: Callable[[Envelope], bool] = lambda _: False
    ) -> None:
        for _ in range(rounds):
            self.cluster.fetching.time_out_lost_rounds()  # a broken connection is noticed
            for broker_id, leader_id in self.cluster.fetch_rounds():
                self.cluster.fetch_round(broker_id, leader_id)
            self.deliver(held)

    def produce(self, broker_id: int, *, acks_all: bool = True) -> str:
        answer = self.cluster.produce(0, broker_id, acks_all=acks_all)
        self.checker.check()
        return answer

    def do(self, operation: Callable[[], None]) -> None:
        operation()
        self.deliver()

    def log(self, broker_id: int) -> dict[int, tuple[int, int]]:
        return self.checker.contents(self.cluster.brokers[broker_id].replicas[0])

    @property
    def acked(self) -> dict[int, int]:
        return self.cluster.acked[0]

    def isr(self) -> tuple[int, ...]:
        return self.cluster.states[0].isr


@pytest.fixture(params=[Mode.SESSIONLESS, Mode.SESSIONS], ids=lambda mode: mode.value)
def script(tmp_path: Path, request: pytest.FixtureRequest) -> Script:
    return Script(tmp_path, request.param)


def test_acks_all_completes_once_the_isr_has_the_batch(script: Script) -> None:
    assert script.produce(0) == "OK"
    assert script.produce(0, acks_all=False) == "OK"
    assert script.acked == {}
    script.replicate(1)  # the followers fetch it, at LEO 0
    assert script.acked == {}
    script.replicate(1)  # and report LEO 1
    assert script.acked == {0: 0}
    assert script.log(1) == script.log(2) == script.log(0)
    assert script.produce(1) == "NOT_LEADER_OR_FOLLOWER"


def test_a_lagging_follower_leaves_the_isr_and_rejoins_once_caught_up(script: Script) -> None:
    cluster = script.cluster
    cluster.isolate(2)
    script.produce(0)
    script.do(lambda: cluster.tick(LAG_MAX_MS // 2))
    script.replicate()
    assert script.acked == {}  # 2 is still in the ISR
    script.do(lambda: cluster.tick(LAG_MAX_MS // 2 + 1))
    assert script.isr() == (0, 1)
    script.replicate()
    assert script.acked == {0: 0}
    cluster.network.cut_link(0, 1)
    script.produce(0, acks_all=False)
    script.do(lambda: cluster.tick(LAG_MAX_MS + 1))
    assert script.isr() == (0,)
    assert script.produce(0) == "NOT_ENOUGH_REPLICAS"  # min.insync.replicas = 2
    assert script.produce(0, acks_all=False) == "OK"
    script.do(cluster.heal)
    script.replicate(4)
    assert sorted(script.isr()) == [0, 1, 2]
    assert script.log(2) == script.log(0)


def test_kip101_a_follower_whose_hw_lags_keeps_what_the_leader_committed(script: Script) -> None:
    """KIP-101 scenario 1: a follower whose HW lags the leader's starts following a new leader;
    truncating to its HW would drop m2, which it then lacks when elected a moment later."""
    cluster = script.cluster
    script.produce(0)
    script.replicate(2)
    script.produce(0)
    for follower in (1, 2, 2, 1):  # 2 reports m2 first: it learns HW 1, broker 1 learns HW 2
        cluster.fetch_round(follower, 0)
        script.deliver()
    assert script.acked == {0: 0, 1: 1}
    assert cluster.brokers[2].replicas[0].log.high_watermark == 1
    cluster.isolate(0, from_etcd=True)
    script.do(lambda: cluster.expire(0))
    assert (cluster.states[0].leader, cluster.states[0].leader_epoch) == (1, 1)
    cluster.fetch_round(2, 1)  # its epoch query: epoch 0 ends at 2 on broker 1, as here
    script.deliver()
    script.do(lambda: cluster.crash(1))  # before broker 2 fetched anything
    script.do(lambda: cluster.expire(1))
    assert (cluster.states[0].leader, cluster.states[0].leader_epoch) == (2, 2)
    assert script.log(2) == {0: (0, 0), 1: (0, 1)}


def test_kip101_divergent_suffix_is_cut_at_the_epoch_boundary(script: Script) -> None:
    """KIP-101 scenario 2: the old leader wrote m2 that no follower got; the new leader
    writes m3 at the same offset; the old leader comes back, truncates m2 and takes m3."""
    cluster = script.cluster
    script.produce(0)
    script.replicate(2)
    cluster.isolate(0)
    script.produce(0, acks_all=False)  # m2, offset 1, epoch 0: only on broker 0
    assert script.log(0)[1] == (0, 1)
    script.do(lambda: cluster.crash(0))
    script.do(lambda: cluster.expire(0))
    script.do(cluster.heal)
    assert script.produce(1) == "OK"  # m3, offset 1, epoch 1
    script.replicate()
    assert script.acked == {0: 0, 1: 2}
    script.do(lambda: cluster.restart(0))
    script.replicate(4)
    assert any("truncate p0 on 0: 2 -> " in line for line in cluster.trace)
    assert script.log(0) == script.log(1) == script.log(2)
    assert script.log(0)[1] == (1, 2)
    assert cluster.states[0].leader == 0  # preferred leader again, with m3


def test_a_zombie_leader_never_acknowledges_and_truncates_when_back(script: Script) -> None:
    cluster = script.cluster
    cluster.isolate(0, from_etcd=True)
    assert script.produce(0) == "OK"  # it still believes in an ISR of three
    for _ in range(3):
        script.do(lambda: cluster.tick(LAG_MAX_MS + 1))  # its shrinks fail: etcd is away
    assert script.isr() == (0, 1, 2)
    assert script.acked == {}
    script.do(lambda: cluster.expire(0))
    assert cluster.states[0].leader == 1
    assert script.produce(1) == "OK"
    script.replicate()
    assert script.acked == {0: 1}
    assert cluster.brokers[0].replicas[0].leader is not None  # still believes it leads
    script.do(cluster.heal)
    script.replicate(4)
    assert script.log(0) == script.log(1)
    assert script.log(0)[0] == (1, 1)


def test_a_follower_with_stale_metadata_is_fenced_until_it_learns(script: Script) -> None:
    """Leadership goes 0 -> 1 -> 0 while broker 2 hears nothing: its fetch carries epoch 0,
    which the leader of epoch 2 refuses; the follower idles until the metadata arrives."""
    cluster = script.cluster

    def to_two(envelope: Envelope) -> bool:
        return envelope.dst == 2 and isinstance(envelope.body, Metadata)

    script.produce(0)
    script.replicate(2)
    cluster.crash(0)
    cluster.expire(0)
    script.deliver(to_two)
    cluster.restart(0)
    script.deliver(to_two)
    script.replicate(3, held=to_two)
    assert (cluster.states[0].leader, cluster.states[0].leader_epoch) == (0, 2)
    stale = cluster.brokers[2].replicas[0].follower
    assert stale is not None
    assert (stale.leader_id, stale.leader_epoch) == (0, 0)
    script.replicate(1, held=to_two)
    assert stale.status is FollowerStatus.FENCED
    assert stale.last_error == "FENCED_LEADER_EPOCH"
    script.deliver()
    # With a session, the round that forgot the fenced partition is parked on the leader (it
    # holds nothing new for it); the new machine joins the next round, once the poll ends.
    script.do(lambda: cluster.tick(MAX_WAIT_MS))
    script.replicate(3)
    follower = cluster.brokers[2].replicas[0].follower
    assert follower is not None
    assert follower.leader_epoch == 2
    assert follower.status is FollowerStatus.FETCHING
    assert script.log(2) == script.log(0)
