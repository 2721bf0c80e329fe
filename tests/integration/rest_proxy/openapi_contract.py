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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTRACT_EXAMPLES", "ContractRun", "Waiver", "run_contract"]

CONTRACT_EXAMPLES = int(os.environ.get("YAK_CONTRACT_EXAMPLES", "5"))
#: The whole CLI run's limit (s); a bounded run takes a fraction of it.
_RUN_SECONDS = 600


@dataclass(frozen=True)
class Waiver:
    """A check that cannot hold for one operation, and why (kept in the config as a comment)."""

    operation: str
    check: str
    why: str


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
    for item in exceptions:
        lines += [
            f"# {item.why}",
            "[[operations]]",
            f'include-name = "{item.operation}"',
            f"checks.{item.check}.enabled = false",
            "",
        ]
    return "\n".join(lines)


def run_contract(document_url: str, folder: Path, exceptions: Sequence[Waiver] = ()) -> ContractRun:
    """Run every check and phase against the document at ``document_url``."""
    config = folder / "schemathesis.toml"
    config.write_text(_config(exceptions))
    script = str(Path(sys.executable).with_name("schemathesis"))
    argv = [script, "--no-color", "--config-file", str(config), "run", document_url]
    argv += ["--checks", "all", "--max-examples", str(CONTRACT_EXAMPLES), "--seed", "1"]
    argv += ["--workers", "1", "--request-timeout", "5", "--suppress-health-check", "all"]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=_RUN_SECONDS, cwd=folder, check=False
    )
    return ContractRun(done.returncode, done.stdout + done.stderr)
