"""The pure arithmetic of ``make bench-kafka``: ratios, the goals of issue 32 with their
verdicts, and ``clients_passing`` read from the matrix tests' JUnit XML report.

**The matrix** is every test of the matrix modules parametrised by client: its JUnit
``testcase`` name ends with ``[<client>]`` (``test_…[aiokafka]``). A client passes when it has
at least one such test and each of them passed (no ``failure``, ``error`` or ``skipped``
element); tests that are not parametrised by client are not cells of the matrix and count for
no client. No I/O: the report's text is an argument. Safe from any thread.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadtest.queue.calc import Goal

__all__ = ["CLIENTS", "GOALS", "Matrix", "goal_verdicts", "matrix_from_junit", "ratio"]

#: The three Python clients of the matrix, as the test ids name them.
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")

GOALS = (
    Goal("produce_kafka_vs_redis", 3, True, "≥ 3x Redis pipelined XADD (1 KiB, RF 3, acks=all)"),
    Goal("consume_kafka_vs_redis", 3, True, "≥ 3x Redis XREADGROUP (backlog drain)"),
    Goal("kafka_acks1_p50_ms", 0.5, False, "≤ 0.5 ms (idle, back-to-back, one connection)"),
    Goal("clients_passing", len(CLIENTS), True, f"all {len(CLIENTS)} clients pass the matrix"),
)
_NOT_PASSED = ("failure", "error", "skipped")


def ratio(mine: float | None, theirs: float | None) -> float | None:
    """``mine / theirs`` to 3 decimals; None when either is missing or ``theirs`` is not > 0."""
    if mine is None or theirs is None or theirs <= 0:
        return None
    return round(mine / theirs, 3)


def goal_verdicts(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each goal with the run's value and whether it was met (a missing value is not)."""
    verdicts: dict[str, dict[str, Any]] = {}
    for goal in GOALS:
        value = results.get(goal.key)
        number = float(value) if isinstance(value, int | float) else None
        verdicts[goal.key] = {"goal": goal.text, "value": value, "met": goal.met(number)}
    return verdicts


@dataclass
class Matrix:
    """The matrix tests' outcome by client: the cells (test names without the client id)
    that passed and those that did not."""

    passed: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)

    def passing(self) -> list[str]:
        """The clients with at least one cell and none failed, in ``CLIENTS`` order."""
        return [c for c in CLIENTS if self.passed.get(c) and not self.failed.get(c)]

    def figures(self) -> dict[str, Any]:
        return {
            "clients_passing": len(self.passing()),
            "clients_passing_names": self.passing(),
            "matrix_cells": {
                c: len(self.passed.get(c, [])) + len(self.failed.get(c, [])) for c in CLIENTS
            },
            "matrix_failed": {c: sorted(self.failed[c]) for c in CLIENTS if self.failed.get(c)},
        }


def matrix_from_junit(report: str, clients: Sequence[str] = CLIENTS) -> Matrix:
    """The ``Matrix`` of a pytest ``--junitxml`` report's text (see the module docstring)."""
    matrix = Matrix()
    for case in ET.fromstring(report).iter("testcase"):
        name = case.get("name", "")
        cell, _, rest = name.partition("[")
        client = rest.removesuffix("]")
        if client not in clients:
            continue
        outcome = (
            matrix.failed if any(case.find(t) is not None for t in _NOT_PASSED) else matrix.passed
        )
        outcome.setdefault(client, []).append(cell)
    return matrix
