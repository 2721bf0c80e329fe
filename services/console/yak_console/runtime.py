"""``ConsoleRuntime``: the console's clients of the public API and its sampler.

The console holds nothing durable: every page is the public API's answer (through the
``yak.sdk`` clients, as any user would call it) or the sampler's recent picture of it.
"""

from __future__ import annotations

import httpx

from yak.sdk import AsyncAdmin, AsyncProducer
from yak.sdk.reader import AsyncPartitionReader
from yak_console.sampler import Sampler
from yak_console.settings import ConsoleSettings
from yak_console.topic_directory import TopicDirectory

__all__ = ["ConsoleRuntime"]


class ConsoleRuntime:
    """Opened by the app's lifespan; closed with it."""

    def __init__(
        self, settings: ConsoleSettings, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self._transport = transport
        timeout_ms = settings.request_timeout_ms
        self.admin = AsyncAdmin(
            settings.api_url, request_timeout_ms=timeout_ms, transport=transport
        )
        self.reader = AsyncPartitionReader(
            settings.api_url, request_timeout_ms=timeout_ms, transport=transport
        )
        self.sampler = Sampler(
            self.admin,
            interval_s=settings.sample_interval_ms / 1000,
            history=settings.history,
        )
        self.topics = TopicDirectory(self.admin)
        self._producer: AsyncProducer | None = None

    def producer(self) -> AsyncProducer:
        """The producer for the produce page (made on first use: a read-only console never
        opens one)."""
        if self._producer is None:
            self._producer = AsyncProducer(
                self.settings.api_url,
                linger_ms=0,
                request_timeout_ms=self.settings.request_timeout_ms,
                delivery_timeout_ms=self.settings.request_timeout_ms + 5_000,
                max_block_ms=self.settings.request_timeout_ms,
                transport=self._transport,
            )
        return self._producer

    async def start(self) -> None:
        self.sampler.start()

    async def stop(self) -> None:
        await self.sampler.stop()
        await self.topics.aclose()
        if self._producer is not None:
            await self._producer.aclose()
        await self.reader.aclose()
        await self.admin.aclose()
