"""Seeded random schedules of produce, fetch, drop, isolation, crash/restart and leader change
on three replicas; the invariants of docs/replication.md are checked after every step.

``YAK_SIM_SEED=<n>`` replays one seed (with its trace printed on failure);
``YAK_SIM_SEEDS=<count>`` runs more seeds than the suite's default.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.broker.replication.sim import Simulation

STEPS = 250
_ONE = os.environ.get("YAK_SIM_SEED")
SEEDS = [int(_ONE)] if _ONE else list(range(int(os.environ.get("YAK_SIM_SEEDS", "40"))))


def run(seed: int, folder: Path) -> Simulation:
    sim = Simulation(seed, folder)
    try:
        for step in range(STEPS):
            sim.step()
            try:
                sim.check()
            except AssertionError as exc:
                trace = "\n".join(sim.trace[-40:])
                raise AssertionError(
                    f"seed {seed} step {step}: {exc}\nreplay: YAK_SIM_SEED={seed}\n{trace}"
                ) from exc
        sim.settle()
        # Healed and quiet: every replica holds the leader's log up to the leader's HW.
        leader = sim.brokers[sim.state.leader]
        logs = {b: sim.records(broker) for b, broker in sim.brokers.items()}
        for offset, value in sim.acked.items():
            assert logs[leader.broker_id][offset][1] == value, f"seed {seed}: lost {value!r}"
        for broker_id, log in logs.items():
            for offset in range(leader.log.high_watermark):
                assert log.get(offset) == logs[leader.broker_id].get(offset), (
                    f"seed {seed}: broker {broker_id} differs at {offset} after settling"
                )
    finally:
        sim.close()
    return sim


@pytest.mark.parametrize("seed", SEEDS)
def test_no_acknowledged_record_is_lost_and_replicas_agree(seed: int, tmp_path: Path) -> None:
    run(seed, tmp_path)


def test_the_schedules_exercise_failover_and_truncation(tmp_path: Path) -> None:
    """The random schedules are not vacuous: across seeds, leaders change, records are
    acknowledged, and followers truncate divergent suffixes."""
    leader_changes = acknowledged = truncations = 0
    for seed in range(12):
        sim = run(seed, tmp_path / str(seed))
        leader_changes += sim.state.leader_epoch
        acknowledged += len(sim.acked)
        truncations += sum(line.startswith("truncate") for line in sim.trace)
    assert leader_changes >= 6, leader_changes
    assert acknowledged >= 60, acknowledged
    assert truncations >= 3, truncations
