"""``yak partitions``, ``yak brokers`` and ``yak groups offsets``: usage errors are refused
before anything is sent (the commands at work are in tests/integration/test_operations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from yak.cli.main import app

# Nothing listens here: a command that got past its checks would fail with NETWORK_EXCEPTION.
NOWHERE = ("--coordinator", "http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["partitions", "reassign", *NOWHERE], "give one of --generate"),
        (["partitions", "reassign", "--execute", *NOWHERE], "need a PLAN"),
        (["partitions", "reassign", "--generate", "--execute", *NOWHERE], "give one of"),
        (["partitions", "reassign", "--generate", "--brokers", "1", *NOWHERE], "--topic"),
        (
            ["partitions", "reassign", "--generate", "--topic", "t", "--brokers", "1,1", *NOWHERE],
            "without repeats",
        ),
        (["partitions", "elect-leaders", "--partition", "0", *NOWHERE], "--partition needs"),
        (["brokers", "decommission", *NOWHERE], "give a broker ID, or --status"),
        (["brokers", "decommission", "1", "--status", *NOWHERE], "give a broker ID, or --status"),
        (["brokers", "forget", *NOWHERE, "--", "-1"], "greater than or equal to 0"),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ")


def test_a_malformed_plan_is_refused_with_its_problem(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": []}]}'
    )
    result = CliRunner().invoke(app, ["partitions", "reassign", str(plan), "--verify", *NOWHERE])
    assert result.exit_code == 2
    assert "replicas must be a non-empty list" in result.output.replace("\n", " ")


def test_kafkas_topics_to_move_file_is_read(tmp_path: Path) -> None:
    bad = tmp_path / "topics.json"
    bad.write_text('{"version": 1}')
    argv = ["partitions", "reassign", "--generate", "--brokers", "1"]
    refused = CliRunner().invoke(app, [*argv, "--topics-to-move-json-file", str(bad), *NOWHERE])
    assert refused.exit_code == 2
    good = tmp_path / "good.json"
    good.write_text('{"version": 1, "topics": [{"topic": "orders"}]}')
    sent = CliRunner().invoke(app, [*argv, "--topics-to-move-json-file", str(good), *NOWHERE])
    assert sent.exit_code == 1  # past the checks: the coordinator is not there
    assert "NETWORK_EXCEPTION" in sent.output


def test_an_offsets_file_without_offsets_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "offsets.json"
    empty.write_text('{"version": 1, "group": "g", "offsets": []}')
    url = ("--url", "http://127.0.0.1:9")
    result = CliRunner().invoke(app, ["groups", "offsets", "import", "g", str(empty), *url])
    assert result.exit_code == 2
    assert "holds no offsets" in result.output.replace("\n", " ")
