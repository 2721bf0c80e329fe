"""``TopicDirectory``: one request describes every missing topic; gone ones are forgotten;
stale ones are fetched again in the background, in one request too."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import cast

import pytest

from yak.api.admin import TopicDescription
from yak.errors import BrokerNotAvailableError
from yak.sdk import AsyncAdmin
from yak_console.topic_directory import TopicDirectory


def _topic(name: str, partitions: int = 1) -> TopicDescription:
    return TopicDescription(
        name=name,
        topic_id=f"id-{name}",
        partition_count=partitions,
        replication_factor=1,
        configs={},
        partitions=[],
    )


class _Admin:
    """The one call the directory makes, answered from ``topics``; each call recorded."""

    def __init__(self, *names: str) -> None:
        self.topics = {n: _topic(n) for n in names}
        self.calls: list[list[str] | None] = []
        self.fail = False

    async def describe_topics(self, names: Collection[str] | None = None) -> list[TopicDescription]:
        self.calls.append(None if names is None else sorted(names))
        if self.fail:
            raise BrokerNotAvailableError("proxy down")
        wanted = self.topics if names is None else [n for n in names if n in self.topics]
        return [self.topics[n] for n in sorted(wanted)]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _directory(admin: _Admin, clock: _Clock) -> TopicDirectory:
    return TopicDirectory(cast(AsyncAdmin, admin), max_age_s=10.0, clock=clock)


async def test_missing_topics_are_described_in_one_request() -> None:
    admin, clock = _Admin("a", "b", "c"), _Clock()
    directory = _directory(admin, clock)
    found = await directory.describe_all(["c", "a", "gone"])
    assert sorted(found) == ["a", "c"]
    assert admin.calls == [["a", "c", "gone"]]
    # Kept ones are served without a request; only the new one is asked for.
    found = await directory.describe_all(["a", "b", "c"])
    assert sorted(found) == ["a", "b", "c"]
    assert admin.calls == [["a", "c", "gone"], ["b"]]
    await directory.aclose()


async def test_fresh_asks_again_and_forgets_deleted_topics() -> None:
    admin, clock = _Admin("a", "b"), _Clock()
    directory = _directory(admin, clock)
    await directory.describe_all(["a", "b"])
    del admin.topics["b"]
    admin.topics["a"] = _topic("a", partitions=4)
    found = await directory.describe_all(["a", "b"], fresh=True)
    assert list(found) == ["a"]
    assert found["a"].partition_count == 4
    assert admin.calls[-1] == ["a", "b"]
    await directory.aclose()


async def test_stale_topics_are_served_then_refreshed_in_the_background() -> None:
    admin, clock = _Admin("a", "b"), _Clock()
    directory = _directory(admin, clock)
    await directory.describe_all(["a", "b"])
    admin.topics["a"] = _topic("a", partitions=7)
    clock.now += 11  # both past their age
    served = await directory.describe_all(["a", "b"])
    assert served["a"].partition_count == 1  # the kept one, at once
    await asyncio.sleep(0)  # let the background refresh run
    await asyncio.sleep(0)
    assert admin.calls[-1] == ["a", "b"]  # one request for both
    assert (await directory.describe_all(["a"]))["a"].partition_count == 7
    await directory.aclose()


async def test_a_failed_request_keeps_what_was_known(caplog: pytest.LogCaptureFixture) -> None:
    admin, clock = _Admin("a"), _Clock()
    directory = _directory(admin, clock)
    await directory.describe_all(["a"])
    admin.fail = True
    found = await directory.describe_all(["a", "new"], fresh=True)
    assert list(found) == ["a"]
    assert "describing 2 topics failed" in caplog.text
    await directory.aclose()
