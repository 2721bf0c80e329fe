"""What the Kafka admin handlers need of the coordinator (the controller): the calls
(``ControllerAdmin``, ``AdminClient``'s signatures) and how a client is opened (``OpenAdmin``:
the controller's URL and the principal the broker acts for, ``AdminClient``'s
``on_behalf_of``).

A leaf of the listener's modules (it imports no other ``kafka`` module), so the request context
(``kafka.context``) can name the opener without importing the controller's helpers, which
import the authorizer, which imports the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from yak.api.admin import TopicDeleted, TopicDescription

__all__ = ["ControllerAdmin", "OpenAdmin"]


class ControllerAdmin(Protocol):
    """The coordinator admin calls of the Kafka admin APIs (``AdminClient``'s signatures)."""

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription: ...

    async def delete_topic(self, name: str) -> TopicDeleted: ...

    async def create_partitions(self, name: str, count: int) -> TopicDescription: ...

    async def alter_topic_configs(
        self,
        name: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
    ) -> TopicDescription: ...

    async def aclose(self) -> None: ...


class OpenAdmin(Protocol):
    """Opens a client of the coordinator at a URL acting for a principal (``AdminClient`` in
    a running broker: the cluster secret and ``Yak-On-Behalf-Of``)."""

    def __call__(self, base_url: str, /, *, on_behalf_of: str | None = None) -> ControllerAdmin: ...
