"""``ConsoleRuntime``: the console's clients of the public API and its sampler.

The console holds nothing durable: every page is the public API's answer (through the
``yak.sdk`` clients, as any user would call it) or the sampler's recent picture of it; the
Schemas page asks the schema registry (``yak.sdk.schema_registry``) when one is configured. With
security on, the sampler and the topic directory use the console's own key
(``YAK_CONSOLE_API_KEY``) and each logged-in user gets ``ApiClients`` of their own, holding
their credential, for everything a page asks or changes on their behalf.
"""

from __future__ import annotations

from typing import TypedDict

import httpx

from yak.sdk import AsyncAdmin, AsyncProducer
from yak.sdk.reader import AsyncPartitionReader
from yak.sdk.schema_registry import SchemaRegistryClient
from yak_console.sampler import Sampler
from yak_console.settings import ConsoleSettings
from yak_console.topic_directory import TopicDirectory

__all__ = ["ApiClients", "ConsoleRuntime"]


class _Credential(TypedDict):
    api_key: str | None
    username: str | None
    password: str | None


class ApiClients:
    """An admin, a partition reader, (made on first use) a producer, and the schema
    registry's client when the console has one, with one credential."""

    def __init__(
        self,
        settings: ConsoleSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        registry_transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._settings = settings
        self._transport = transport
        self._credential = _Credential(api_key=api_key, username=username, password=password)
        timeout_ms = settings.request_timeout_ms
        self.admin = AsyncAdmin(
            settings.api_url, request_timeout_ms=timeout_ms, transport=transport, **self._credential
        )
        self.reader = AsyncPartitionReader(
            settings.api_url, request_timeout_ms=timeout_ms, transport=transport, **self._credential
        )
        self._producer: AsyncProducer | None = None
        self.registry: SchemaRegistryClient | None = None
        if settings.schema_registry_url is not None:
            self.registry = SchemaRegistryClient(
                settings.schema_registry_url,
                timeout_s=timeout_ms / 1000,
                transport=registry_transport,
                **self._credential,
            )

    def producer(self) -> AsyncProducer:
        """The producer for the produce page (made on first use: a read-only console never
        opens one)."""
        if self._producer is None:
            timeout_ms = self._settings.request_timeout_ms
            self._producer = AsyncProducer(
                self._settings.api_url,
                linger_ms=0,
                request_timeout_ms=timeout_ms,
                delivery_timeout_ms=timeout_ms + 5_000,
                max_block_ms=timeout_ms,
                transport=self._transport,
                **self._credential,
            )
        return self._producer

    async def aclose(self) -> None:
        if self._producer is not None:
            await self._producer.aclose()
        if self.registry is not None:
            await self.registry.aclose()
        await self.reader.aclose()
        await self.admin.aclose()


class ConsoleRuntime:
    """Opened by the app's lifespan; closed with it."""

    def __init__(
        self,
        settings: ConsoleSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        registry_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self._transport = transport
        self._registry_transport = registry_transport
        self.clients = ApiClients(
            settings, transport, registry_transport=registry_transport, api_key=settings.api_key
        )
        self.admin = self.clients.admin
        self.reader = self.clients.reader
        self.sampler = Sampler(
            self.admin,
            interval_s=settings.sample_interval_ms / 1000,
            idle_interval_s=settings.sample_idle_interval_ms / 1000,
            history=settings.history,
        )
        self.topics = TopicDirectory(self.admin)

    def producer(self) -> AsyncProducer:
        return self.clients.producer()

    def clients_for(
        self,
        *,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> ApiClients:
        """Clients carrying a user's credential (the caller closes them)."""
        return ApiClients(
            self.settings,
            self._transport,
            registry_transport=self._registry_transport,
            api_key=api_key,
            username=username,
            password=password,
        )

    async def start(self) -> None:
        self.sampler.start()

    async def readiness(self) -> str | None:
        """``/readyz``: ready once a sampling reached the public API (an answer refusing the
        console's credential counts: the API is there), not ready while it is unreachable."""
        if self.sampler.latest is None:
            return "the public API has not been sampled yet"
        if self.sampler.unreachable is not None:
            api, why = self.settings.api_url, self.sampler.unreachable
            return f"the public API at {api} is unreachable: {why}"
        return None

    async def stop(self) -> None:
        await self.sampler.stop()
        await self.topics.aclose()
        await self.clients.aclose()
