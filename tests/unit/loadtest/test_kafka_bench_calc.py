"""make bench-kafka's arithmetic: ratios, goal verdicts and the matrix read from JUnit XML."""

from __future__ import annotations

from loadtest.kafka_bench.calc import CLIENTS, goal_verdicts, matrix_from_junit, ratio

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="8">
<testcase classname="t.test_kafka_clients" name="test_produce[confluent-kafka]" time="1"/>
<testcase classname="t.test_kafka_clients" name="test_produce[kafka-python]" time="1"/>
<testcase classname="t.test_kafka_clients" name="test_produce[aiokafka]" time="1"/>
<testcase classname="t.test_kafka_groups" name="test_group[confluent-kafka]" time="1"/>
<testcase classname="t.test_kafka_groups" name="test_group[kafka-python]" time="1">
  <failure message="assert 0 == 30">trace</failure></testcase>
<testcase classname="t.test_kafka_groups" name="test_group[aiokafka]" time="1">
  <skipped message="no broker"/></testcase>
<testcase classname="t.test_kafka_groups" name="test_not_by_client" time="1">
  <error message="boom"/></testcase>
<testcase classname="t.test_kafka_groups" name="test_other[java]" time="1"/>
</testsuite></testsuites>
"""


def test_a_client_passes_only_when_every_cell_of_it_passed() -> None:
    matrix = matrix_from_junit(JUNIT)
    assert matrix.passing() == ["confluent-kafka"]
    figures = matrix.figures()
    assert figures["clients_passing"] == 1
    assert figures["matrix_cells"] == dict.fromkeys(CLIENTS, 2)
    assert figures["matrix_failed"] == {"kafka-python": ["test_group"], "aiokafka": ["test_group"]}


def test_tests_not_parametrised_by_a_matrix_client_count_for_none() -> None:
    only_others = JUNIT.replace("[", "(").replace("]", ")")
    matrix = matrix_from_junit(only_others)
    assert matrix.passing() == []
    assert matrix.figures()["matrix_cells"] == dict.fromkeys(CLIENTS, 0)


def test_ratio_and_verdicts() -> None:
    assert ratio(90_000, 30_000) == 3.0
    assert ratio(1, 0) is None
    assert ratio(None, 5) is None
    verdicts = goal_verdicts(
        {
            "produce_kafka_vs_redis": 3.2,
            "consume_kafka_vs_redis": 2.9,
            "kafka_acks1_p50_ms": 0.41,
            "clients_passing": 3,
        }
    )
    assert {k: v["met"] for k, v in verdicts.items()} == {
        "produce_kafka_vs_redis": True,
        "consume_kafka_vs_redis": False,
        "kafka_acks1_p50_ms": True,
        "clients_passing": True,
    }
    missing = goal_verdicts({"clients_passing": 2})
    assert missing["kafka_acks1_p50_ms"] == {
        "goal": "≤ 0.5 ms (idle, back-to-back, one connection)",
        "value": None,
        "met": False,
    }
    assert missing["clients_passing"]["met"] is False
