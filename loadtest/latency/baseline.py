"""The baseline build: a detached ``git worktree`` of another commit, its services' code path,
and the checks that the processes started on it really run its code.

``worktree(ref)`` adds the worktree in a temporary folder and removes it (``git worktree
remove --force``, then ``prune``) on the way out, also after errors and Ctrl-C. Its services
run through ``loadtest.local_cluster``'s ``python_path``; each then logs ``code: <yak file>
<package file>`` first, which ``code_origins`` reads back and ``check_origins`` compares with
the worktree.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from yak.supervisor import ManagedProcess

__all__ = [
    "ROOT",
    "check_origins",
    "code_origins",
    "current_origins",
    "git",
    "preflight",
    "resolve",
    "revision",
    "worktree",
]

ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("yak", "yak_broker", "yak_coordinator", "yak_rest_proxy")


def git(*args: str, cwd: Path = ROOT) -> str:
    """``git ARGS`` in ``cwd``; its stdout, stripped (CalledProcessError on failure)."""
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()


def resolve(ref: str) -> str:
    """The full commit id of ``ref``."""
    return git("rev-parse", "--verify", f"{ref}^{{commit}}")


def revision() -> str:
    """This checkout's commit, and how many tracked files differ from it (the run measures the
    working tree, not the commit)."""
    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = [line for line in git("status", "--porcelain").splitlines() if line[:2] != "??"]
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not changed:
        return commit
    return f"{commit} + {len(changed)} changed tracked files in the working tree"


@contextmanager
def worktree(ref: str) -> Iterator[Path]:
    """A detached worktree of ``ref`` in a temporary folder, removed on exit."""
    commit = resolve(ref)
    parent = Path(tempfile.mkdtemp(prefix="yak-bench-latency-baseline-"))
    path = parent / "yak"
    try:
        git("worktree", "add", "--detach", str(path), commit)
        yield path
    finally:
        with suppress(OSError, subprocess.SubprocessError):
            git("worktree", "remove", "--force", str(path))
        shutil.rmtree(parent, ignore_errors=True)
        with suppress(OSError, subprocess.SubprocessError):
            git("worktree", "prune")


def preflight(python_path: tuple[str, ...] = ()) -> None:
    """RuntimeError (with the traceback) unless every service's ``main`` module imports on
    ``python_path``'s code (empty: this checkout's), so that a build that cannot start fails
    the run in a second rather than after minutes of measuring."""
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(python_path)
    modules = ", ".join(f"{package}.main" for package in _PACKAGES[1:])
    done = subprocess.run(
        [sys.executable, "-c", f"import {modules}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        where = python_path[0] if python_path else str(ROOT)
        raise RuntimeError(f"the services of {where} do not import:\n{done.stderr[-3000:]}")


def code_origins(processes: Mapping[str, ManagedProcess]) -> dict[str, str]:
    """Each process's ``code:`` line (see the module doc), or ``?`` if its log has none."""
    out = {}
    for name, process in processes.items():
        try:
            lines = process.spec.log_path.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        found = next((line for line in lines if line.startswith("code: ")), "")
        out[name] = found.removeprefix("code: ") or "?"
    return out


def check_origins(origins: Mapping[str, str], checkout: Path) -> None:
    """RuntimeError unless every file of every origin lies inside ``checkout``."""
    wrong = {
        name: files
        for name, files in origins.items()
        if not files.split() or not all(f.startswith(str(checkout)) for f in files.split())
    }
    if wrong:
        raise RuntimeError(f"processes did not import the code of {checkout}: {wrong}")


def current_origins() -> dict[str, str]:
    """Where this process would import each package from (the current build's code)."""
    out = {}
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        out[package] = spec.origin if spec is not None and spec.origin else "?"
    return out
