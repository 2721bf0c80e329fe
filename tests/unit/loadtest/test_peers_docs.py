"""The peers' run rewrites its part of docs/benchmarks.md and keeps the other benchmarks'."""

from __future__ import annotations

from loadtest.peers.__main__ import kept_sections


def test_the_other_benchmarks_sections_are_kept_whole() -> None:
    page = (
        "# Benchmarks\n\nold peers results\n\n"
        "<!-- bench-queue: written by `make bench-queue` -->\n## Queues\n| a | b |\n"
        "<!-- /bench-queue -->\n\n### Reading the queue figures\n\ntext\n\n"
        "<!-- bench-kafka: written by `make bench-kafka` -->\n## Kafka\n<!-- /bench-kafka -->\n"
    )
    kept = kept_sections(page)
    assert kept.startswith("<!-- bench-queue")
    assert "### Reading the queue figures" in kept
    assert kept.endswith("<!-- /bench-kafka -->")
    assert "old peers results" not in kept


def test_a_page_without_other_sections_keeps_nothing() -> None:
    assert kept_sections("# Benchmarks\n\nonly the peers\n") == ""
