"""``TopicDirectory``: recent topic descriptions (configs, replicas, ISR) for list pages.

The sampler's picture holds the logs' sizes and offsets but not each topic's configs or ISR.
A list page reads those from here: descriptions are fetched in one request for every topic
missing (``GET /api/v1/topic-descriptions``, served from the proxy's metadata cache — at 1,000
topics one request, not a thousand), kept, and served while younger than ``max_age_s``; older
ones are still served while one background request fetches them again
(stale-while-revalidate). Changes made through the console store the API's answer at
once (``remember``), so the console's own edits show without waiting. ``describe_all(...,
fresh=True)`` asks for every topic now (the health filter, where stale is wrong).

Owned by the ``ConsoleRuntime`` (one per console, shared by the pages); ``aclose`` stops a
background refresh. Single event loop; concurrent callers may fetch the same missing topics
twice (harmless).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterable

from yak.api.admin import TopicDescription
from yak.errors import YakError
from yak.sdk import AsyncAdmin

__all__ = ["TopicDirectory"]

_log = logging.getLogger(__name__)


class TopicDirectory:
    """Topic descriptions by name, each with the time it was fetched."""

    def __init__(
        self,
        admin: AsyncAdmin,
        *,
        max_age_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admin = admin
        self._max_age_s = max_age_s
        self._clock = clock
        self._known: dict[str, tuple[float, TopicDescription]] = {}
        self._refreshing: asyncio.Task[None] | None = None

    async def aclose(self) -> None:
        task, self._refreshing = self._refreshing, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def remember(self, topic: TopicDescription) -> None:
        self._known[topic.name] = (self._clock(), topic)

    def forget(self, name: str) -> None:
        self._known.pop(name, None)

    def retain(self, names: Collection[str]) -> None:
        """Drop topics that no longer exist."""
        for name in [n for n in self._known if n not in names]:
            del self._known[name]

    async def describe(self, name: str) -> TopicDescription:
        """One topic, asked now (raises the API's error, e.g. for an unknown topic)."""
        found = await self._admin.describe_topic(name)
        self.remember(found)
        return found

    async def describe_all(
        self, names: Iterable[str], *, fresh: bool = False
    ) -> dict[str, TopicDescription]:
        """The descriptions of ``names`` that exist: kept ones unless ``fresh``, the missing
        ones fetched now (one request for all of them); kept ones past their age are fetched
        again in the background (one request too)."""
        wanted = list(dict.fromkeys(names))
        missing = wanted if fresh else [n for n in wanted if n not in self._known]
        if missing:
            await self._fetch(missing)
        now = self._clock()
        stale = [
            n for n in wanted if n in self._known and now - self._known[n][0] > self._max_age_s
        ]
        if stale and (self._refreshing is None or self._refreshing.done()):
            self._refreshing = asyncio.get_running_loop().create_task(
                self._fetch(stale), name="console-topic-directory"
            )
        return {n: self._known[n][1] for n in wanted if n in self._known}

    async def _fetch(self, names: list[str]) -> None:
        """Describe ``names`` in one request: remember the found, forget the gone ones."""
        try:
            found = await self._admin.describe_topics(names)
        except (YakError, OSError) as exc:  # keep what we had; the page shows the rest
            _log.warning("describing %d topics failed: %s", len(names), exc)
            return
        now = self._clock()
        for topic in found:
            self._known[topic.name] = (now, topic)
        described = {t.name for t in found}
        for name in names:
            if name not in described:
                self.forget(name)
