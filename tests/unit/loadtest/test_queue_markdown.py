"""The queue benchmark's block of ``docs/benchmarks.md`` (``loadtest.queue.markdown``): rendered
from the run's document, replacing only its own block."""

from __future__ import annotations

from typing import Any

from loadtest.queue.calc import goal_verdicts
from loadtest.queue.markdown import BEGIN, END, block, replace_block


def _document(**figures: Any) -> dict[str, Any]:
    return {
        "goals": goal_verdicts(figures),
        **figures,
        "machine": {"cpus": 2, "platform": "Linux", "python": "3.11.7", "measured_at": "T"},
        "load_average_start": [1.5, 1.0, 0.5],
        "load_average_end": [2.0, 1.0, 0.5],
    }


def test_the_block_has_every_goal_with_its_verdict_the_machine_and_failures() -> None:
    text = block(_document(share_ack_rps=1_234.5, delay_lateness_p99_ms=80.0, pending_error="boom"))
    assert text.startswith(BEGIN)
    assert text.rstrip().endswith(END)
    assert "| `share_ack_rps` | 1,234.5 | ≥ 20,000 records/s of 1 KiB, RF 3 | **no** |" in text
    assert "| `delay_lateness_p99_ms` | 80.0 | ≤ 100 ms | yes |" in text
    assert "| `filter_cost_ratio` | - |" in text
    assert "2 CPUs" in text
    assert "1.50/1.00/0.50" in text
    assert "`pending_error`: boom" in text


def test_a_page_without_the_block_gets_it_appended() -> None:
    page = replace_block("# Title\n\ntext\n", f"{BEGIN}\nnew\n{END}\n")
    assert page == f"# Title\n\ntext\n\n{BEGIN}\nnew\n{END}\n"


def test_a_run_replaces_only_its_block_and_keeps_what_follows() -> None:
    page = f"intro\n\n{BEGIN}\nold\n{END}\n\n### Reading\n\nhand-written\n"
    assert replace_block(page, f"{BEGIN}\nnew\n{END}\n") == (
        f"intro\n\n{BEGIN}\nnew\n{END}\n\n### Reading\n\nhand-written\n"
    )
