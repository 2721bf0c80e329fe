"""``ReplicaFetcher`` with its leader unregistered (restarting, or gone): metadata changes wake
it by the thousand meanwhile, and each wake must not build a round over every partition."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.unit.broker.replication.support import make_log
from yak.metadata.models import PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak_broker.replication.replica_fetcher import ReplicaFetcher
from yak_broker.replication.state.fetch_session import FetchRound, FetchSession
from yak_broker.replication.state.follower_partition import FollowerPartition


async def test_no_round_is_built_while_the_leader_is_not_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = ClusterSnapshot(revision=1)  # broker 1, the leader, is not registered
    fetcher = ReplicaFetcher(
        0, 1, lambda: snapshot, lambda: 0, max_wait_ms=100, max_bytes=1 << 20, backoff_ms=10
    )
    built: list[FetchRound] = []
    next_round = FetchSession.next_round

    def counted(session: FetchSession) -> FetchRound:
        built.append(round_ := next_round(session))
        return round_

    monkeypatch.setattr(FetchSession, "next_round", counted)
    logs = []
    for p in range(50):
        log = make_log(tmp_path, f"t-{p}")
        logs.append(log)
        state = PartitionState(
            topic="t", partition=p, leader=1, leader_epoch=1, replicas=(1, 0), isr=(1, 0)
        )
        fetcher.add(FollowerPartition(0, state, log))
    fetcher.start()
    try:
        for _ in range(100):  # a burst of metadata changes
            fetcher.wake()
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        assert built == []
        assert fetcher.session.epoch == 0  # its next round, once the leader is back, is full
    finally:
        await fetcher.stop()
        for log in logs:
            log.close()
