"""The runnable delivery-semantics examples of docs/examples/, executed against a real cluster."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from loadtest.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_at_most_once(cluster: LocalCluster) -> None:
    processed = await asyncio.to_thread(load("at_most_once").main, cluster.proxy_url(0))
    assert sorted(processed) == list(range(10))  # nothing twice (and here, nothing lost)


async def test_at_least_once_reprocesses_after_a_crash(cluster: LocalCluster) -> None:
    first, second = await asyncio.to_thread(load("at_least_once").main, cluster.proxy_url(1))
    assert first  # the first consumer processed something, then died before committing
    assert second == list(range(10))  # its successor processed everything again: none lost


async def test_exactly_once_after_a_crash_between_produce_and_commit(
    cluster: LocalCluster,
) -> None:
    out = await asyncio.to_thread(load("exactly_once").main, cluster.proxy_url(0))
    assert out == [f"RECORD-{i}" for i in range(20)]
