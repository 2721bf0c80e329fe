"""GcTuning: the thresholds from YAK_GC_THRESHOLDS over the service's measured default, and the
heap frozen at the end of the app's lifespan start-up, after what the app started."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from starlette.applications import Starlette

from yak.gc_tuning import DEFAULT_THRESHOLDS, GcTuning, frozen_after_startup, parse_thresholds


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    """The test process's collector is left as it was found."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50000,20,1000", (50_000, 20, 1_000)),
        (" 8000 , 5 ", (8_000, 5, 7)),  # the third is the default's
        ("9000", (9_000, 6, 7)),
    ],
)
def test_thresholds_are_parsed_over_the_default(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_thresholds(text, default=(1, 6, 7)) == expected


@pytest.mark.parametrize("text", ["", "a", "1,2,3,4", "1.5", "-1", "1,,2", "700;10"])
def test_malformed_thresholds_name_the_variable(text: str) -> None:
    with pytest.raises(ValueError, match="YAK_GC_THRESHOLDS"):
        parse_thresholds(text)


@pytest.mark.parametrize("text", ["0", "700,0", "700,10,0"])
def test_a_zero_threshold_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        parse_thresholds(text)


def test_each_service_has_its_measured_default_and_the_environment_wins() -> None:
    for service, thresholds in DEFAULT_THRESHOLDS.items():
        assert GcTuning.from_env(service, {}) == GcTuning(service, thresholds, freeze=True)
    assert GcTuning.from_env("console", {}).thresholds == (700, 10, 10)  # CPython's own
    tuned = GcTuning.from_env("broker", {"YAK_GC_THRESHOLDS": "20000", "YAK_GC_FREEZE": "no"})
    assert tuned.thresholds == (20_000, *DEFAULT_THRESHOLDS["broker"][1:])
    assert tuned.freeze is False
    with pytest.raises(ValueError, match="YAK_GC_THRESHOLDS"):
        GcTuning.from_env("broker", {"YAK_GC_THRESHOLDS": "lots"})


def _app(events: list[str]) -> Starlette:
    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, object]]:
        events.append(f"started, frozen {gc.get_freeze_count()}")
        yield {"cache": object()}
        events.append("stopped")

    return Starlette(lifespan=lifespan)


async def test_apply_sets_the_thresholds_and_freezes_after_the_app_started() -> None:
    events: list[str] = []
    app = _app(events)
    GcTuning("rest-proxy", (12_345, 6, 78)).apply(app)
    assert gc.get_threshold() == (12_345, 6, 78)
    assert gc.get_freeze_count() == 0  # not before the app has started
    async with app.router.lifespan_context(app) as state:
        assert events == ["started, frozen 0"]  # the app's own start-up ran first
        assert state is not None  # its state is handed on
        assert "cache" in state
        assert gc.get_freeze_count() > 0
    assert events[-1] == "stopped"


async def test_a_cycle_start_up_dropped_is_collected_before_the_freeze() -> None:
    collected: list[str] = []

    class Node:
        other: object = None

        def __del__(self) -> None:
            collected.append("node")

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        node = Node()
        node.other = node  # garbage only the collector frees: never frozen
        del node
        yield

    app = Starlette(lifespan=lifespan)
    frozen_after_startup(app)
    async with app.router.lifespan_context(app):
        assert collected == ["node"]


async def test_no_freeze_when_turned_off() -> None:
    app = _app([])
    GcTuning("broker", (700, 10, 10), freeze=False).apply(app)
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == 0
