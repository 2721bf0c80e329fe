"""How the record and group commands find the rest-proxy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from yak.cli.proxy import DEFAULT_PROXY_URL, proxy_url, run_or_exit
from yak.errors import UnknownTopicOrPartitionError


def test_the_flag_wins(tmp_path: Path) -> None:
    assert proxy_url("http://proxy:1", tmp_path) == "http://proxy:1"


def test_the_rest_proxy_of_cluster_json(tmp_path: Path) -> None:
    processes = [
        {"name": "coordinator-0", "url": "http://127.0.0.1:19410"},
        {"name": "rest-proxy", "url": "http://127.0.0.1:19430"},
    ]
    (tmp_path / "cluster.json").write_text(json.dumps({"processes": processes}))
    assert proxy_url(None, tmp_path) == "http://127.0.0.1:19430"


@pytest.mark.parametrize("content", [None, "not json", "[]", '{"processes": [{"name": "x"}]}'])
def test_else_the_default_port(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "cluster.json").write_text(content)
    assert proxy_url(None, tmp_path) == DEFAULT_PROXY_URL


def test_errors_print_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    async def fail() -> None:
        raise UnknownTopicOrPartitionError("topic 'x' does not exist")

    with pytest.raises(typer.Exit) as exit_info:
        run_or_exit(fail())
    assert exit_info.value.exit_code == 1
    assert capsys.readouterr().err == (
        "error: UNKNOWN_TOPIC_OR_PARTITION: topic 'x' does not exist\n"
    )
