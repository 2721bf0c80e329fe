"""The context-manager protocol of every client: leaving the ``with`` block closes it.

``AsyncClosing`` is for the asyncio clients (``BrokerClient``, ``AdminClient``, the SDK's
``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin``, ``AsyncPartitionReader``) and the
metadata store's ``Watch`` and ``LeaseKeeper``: a subclass writes ``aclose()`` and gets
``async with client:`` — the client itself on the way in,
``aclose()`` on the way out, whether or not the block raised (the exception is never
swallowed). ``Closing`` is the same for the blocking ones (the SDK's twins, Spark's
``YakHttp``) with ``close()``. A client that must do more on the way in (``AsyncConsumer``
joins its group, a watch opens, a lease keeper starts) overrides ``__aenter__`` alone. Part of
the core: the metadata layer uses it as the client products do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["AsyncClosing", "Closing"]


class AsyncClosing(ABC):
    """``async with client:`` yields ``client`` and awaits ``client.aclose()`` at the end."""

    __slots__ = ()

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the client holds: connections, background tasks."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Closing(ABC):
    """``with client:`` yields ``client`` and calls ``client.close()`` at the end."""

    __slots__ = ()

    @abstractmethod
    def close(self) -> None:
        """Release what the client holds: connections, threads."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
