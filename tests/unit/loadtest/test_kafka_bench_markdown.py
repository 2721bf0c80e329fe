"""make bench-kafka's block of docs/benchmarks.md: rendered from a document, replaced in place."""

from __future__ import annotations

from loadtest.kafka_bench.markdown import BEGIN, END, block, replace_block

DOCUMENT = {
    "goals": {
        "produce_kafka_vs_redis": {"goal": "≥ 3x", "value": 3.25, "met": True},
        "kafka_acks1_p50_ms": {"goal": "≤ 0.5 ms", "value": 0.62, "met": False},
    },
    "kafka_produce_rps": 91234.4,
    "clients_passing_names": ["confluent-kafka", "aiokafka"],
    "matrix_failed": {"kafka-python": ["test_group"]},
    "kafka_idle_error": "TimeoutError: no leader",
    "load_average_start": [1.5, 1.25, 1.0],
    "machine": {"cpus": 2, "measured_at": "2026-12-06T12:40:00Z"},
}


def test_the_block_shows_goals_figures_matrix_and_failures() -> None:
    text = block(DOCUMENT)
    assert text.startswith(BEGIN)
    assert text.rstrip().endswith(END)
    assert "| `produce_kafka_vs_redis` | 3.250 | ≥ 3x | yes |" in text
    assert "| `kafka_acks1_p50_ms` | 0.620 | ≤ 0.5 ms | **no** |" in text
    assert "| Kafka produce records/s (max-rate search, 1 KiB, RF 3, acks=all) | 91,234 |" in text
    assert "| Redis XADD records/s (pipelined, same workload) | - |" in text
    assert "Clients passing the whole matrix: confluent-kafka, aiokafka." in text
    assert "kafka-python failed: test_group." in text
    assert "`kafka_idle_error`: TimeoutError: no leader" in text
    assert "load average 1.50/1.25/1.00 at the start" in text


def test_replace_block_keeps_the_rest_of_the_page() -> None:
    page = "# Benchmarks\n\nintro\n"
    first = replace_block(page, block(DOCUMENT))
    assert first.startswith(page.rstrip("\n") + "\n\n" + BEGIN)
    later = replace_block(first + "\nnotes after\n", block({"goals": {}}))
    assert later.count(BEGIN) == 1
    assert "3.250" not in later
    assert later.endswith("notes after\n")
