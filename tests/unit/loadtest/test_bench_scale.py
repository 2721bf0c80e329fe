"""The scale benchmark's pure parts: goals, the document's keys, the options."""

from __future__ import annotations

import argparse

import pytest

from loadtest.bench_scale import GOALS, Step, document, meets_goals, parse


def _step(partitions: int, **changes: object) -> Step:
    step = Step(
        partitions,
        partitions // 20,
        create_s=3.0,
        converge_s=10.0,
        idle_cpu={"broker-0": 0.01, "broker-1": 0.02, "coordinator-0": 0.01},
        loop_lag_p99_ms={"broker-0": 4.0, "rest-proxy-0": 2.0},
        failover_s=3.0,
        restart_to_isr_s=20.0,
    )
    for name, value in changes.items():
        setattr(step, name, value)
    return step


def test_a_step_meets_the_goals_only_when_every_figure_does() -> None:
    assert meets_goals(_step(1000))
    assert not meets_goals(_step(1000, converge_s=GOALS["converge_s"] + 1))
    assert not meets_goals(_step(1000, idle_cpu={"broker-0": 0.2}))
    assert not meets_goals(_step(1000, loop_lag_p99_ms={"broker-0": 80.0}))
    assert not meets_goals(_step(1000, failover_s=None))  # not measured is not met
    assert not meets_goals(_step(1000, leases_lost=1))
    assert not meets_goals(_step(1000, error="timed out"))


def test_the_document_takes_the_20k_step_and_the_largest_step_that_met_every_goal() -> None:
    options = argparse.Namespace(steps=(1000, 5000, 20000), partitions_per_topic=20, idle=20.0)
    steps = [_step(1000), _step(5000), _step(20000, idle_cpu={"broker-0": 0.4})]
    doc = document(steps, options)
    assert doc["partitions_max"] == 5000
    assert doc["idle_cpu_per_broker_20k"] == 0.4
    assert doc["converge_s_20k"] == 10.0
    assert doc["loop_lag_p99_ms_20k"] == 4.0
    assert doc["figures_from_partitions"] == 20000
    assert [s["meets_goals"] for s in doc["steps"]] == [True, True, False]


def test_a_run_that_stopped_early_reports_its_largest_step() -> None:
    options = argparse.Namespace(steps=(1000, 5000, 20000), partitions_per_topic=20, idle=20.0)
    doc = document([_step(1000), _step(5000, error="not converged")], options)
    assert doc["figures_from_partitions"] == 5000
    assert doc["partitions_max"] == 1000


def test_steps_must_grow() -> None:
    assert parse(["--steps", "100,400"]).steps == (100, 400)
    with pytest.raises(SystemExit):
        parse(["--steps", "400,100"])
    quick = parse(["--quick"])
    assert quick.steps == (60, 200)
