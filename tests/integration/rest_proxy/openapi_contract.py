"""Run schemathesis's CLI as a new user would: every check, every phase, one OpenAPI document.

``schemathesis run <url>/openapi.json --checks all`` runs the examples, coverage, fuzzing
(positive and negative data) and stateful (following the document's links) phases. The run
is bounded (``CONTRACT_EXAMPLES`` per operation, default 5; raise it with
``YAK_CONTRACT_EXAMPLES``) and derandomized (a fixed seed), so it repeats exactly.

Exceptions are per operation and per check, each with the reason the check cannot hold for it
(``Waiver``); none turns a check off for a whole document. docs/rest-api.md lists them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTRACT_EXAMPLES", "ContractRun", "Waiver", "run_contracts"]

CONTRACT_EXAMPLES = int(os.environ.get("YAK_CONTRACT_EXAMPLES", "5"))
#: The whole CLI run's limit (s); a bounded run takes a fraction of it.
_RUN_SECONDS = 600


_PARTITION_FIELDS = (
    ("POST /api/v1/topics", "partitions"),
    ("POST /admin/v1/topics", "partitions"),
    ("POST /v3/clusters/{cluster_id}/topics", "partitions_count"),
    ("POST /api/v1/topics/{topic}/partitions", "count"),
    ("POST /admin/v1/topics/{name}/partitions", "count"),
)


@dataclass(frozen=True)
class Waiver:
    """A check that cannot hold for one operation, and why (kept in the config as a comment)."""

    operation: str
    check: str
    why: str


#: The topic the share-group stream is probed with: one the run never creates.
SHARE_STREAM_TOPIC = "contract-share-stream-absent"


@dataclass(frozen=True)
class ContractRun:
    """What the CLI said: its exit code and its report."""

    returncode: int
    output: str

    def summary(self) -> str:
        """The report from its list of failures on (the whole report if it has none)."""
        start = self.output.find("=== FAILURES")
        return self.output[start:] if start >= 0 else self.output[-6000:]


def _config(exceptions: Sequence[Waiver]) -> str:
    lines = ["# Written by tests/integration/rest_proxy/openapi_contract.py", ""]
    # Every check (what `--checks all` turns on; given here, an operation's waiver overrides it).
    lines += ["[checks]", "enabled = true", ""]
    # A share group's stream of a topic that exists is silent for its acquire wait (5 s) after
    # its first event, longer than the window below: whether the run's own topics (``0`` and
    # the like) are ready by the time it is probed decided whether the run read a timeout.
    # It streams a topic that no request of the run makes (its answer and first event are
    # checked; tests/integration/rest_proxy/test_share_groups.py streams real records).
    lines += [
        "[[operations]]",
        'include-name = "GET /api/v1/share-groups/{group}/stream"',
        "request-timeout = 0.5",
        f'parameters = {{ "query.topic" = "{SHARE_STREAM_TOPIC}" }}',
        "",
    ]
    # A stream never ends: what came in this long is what is checked.
    lines += ["[[operations]]", 'include-path-regex = "/stream$"', "request-timeout = 0.5", ""]
    # Partition counts a generated request may ask for: the cluster is shared by the module,
    # and topics of thousands of partitions starve its brokers (and time the requests out).
    # Before the waivers: an operation takes its parameters from the first entry matching it.
    # The coverage phase takes no dictionary: its boundary values would make a topic of
    # MAX_PARTITIONS (10,000) partitions, so these operations skip it (the other phases send
    # them with the counts above, and invalid counts still).
    lines += ["[dictionaries.partition-counts]", "values = [1, 2, 4, 6]", ""]
    for operation, field in _PARTITION_FIELDS:
        lines += [
            "[[operations]]",
            f'include-name = "{operation}"',
            f'parameters = {{ "body.{field}" = {{ dictionary = "partition-counts", '
            "probability = 1.0 } }",
            "phases.coverage.enabled = false",
            "",
        ]
    for item in exceptions:
        lines += [
            f"# {item.why}",
            "[[operations]]",
            f'include-name = "{item.operation}"',
            f"checks.{item.check}.enabled = false",
            "",
        ]
    return "\n".join(lines)


def _argv(document_url: str, config: Path) -> list[str]:
    script = str(Path(sys.executable).with_name("schemathesis"))
    argv = [script, "--no-color", "--config-file", str(config), "run", document_url]
    argv += ["--max-examples", str(CONTRACT_EXAMPLES), "--seed", "1"]
    argv += ["--workers", "1", "--request-timeout", "5", "--suppress-health-check", "all"]
    return argv


def run_contracts(
    documents: Mapping[str, str], folder: Path, waivers: Sequence[Waiver] = ()
) -> dict[str, ContractRun]:
    """Run every check and phase against each document (name -> URL of its JSON), the runs
    side by side: each waits on its server far more than it computes."""
    config = folder / "schemathesis.toml"
    config.write_text(_config(waivers))
    started = {}
    for name, url in documents.items():
        log = folder / f"{name}.log"
        with log.open("w") as out:
            started[name] = (
                subprocess.Popen(
                    _argv(url, config), stdout=out, stderr=subprocess.STDOUT, cwd=folder
                ),
                log,
            )
    runs = {}
    for name, (process, log) in started.items():
        try:
            returncode = process.wait(timeout=_RUN_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
        runs[name] = ContractRun(returncode, log.read_text(errors="replace"))
    return runs
