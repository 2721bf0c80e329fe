"""``QuotaOverrides``: every principal's quota override (``security/quotas/``), followed.

The values are ``yak.security.quota_store``'s; this keeps one service's copy current with one
prefix watch from the load's revision + 1 (``yak.metadata.watched``), so a change takes effect
within milliseconds everywhere, reloading after a compaction and retrying (with what it has)
while etcd is unreachable. A malformed value is logged and ignored. Used by the rest-proxy
(``yak_rest_proxy.quotas``) and the brokers' Kafka listener (``yak_broker.kafka.quotas``).
Single event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from yak.clock import Clock
from yak.metadata.keyspace import Keyspace
from yak.metadata.store import EventKind, KeyValue, MetadataStore, WatchEvent
from yak.metadata.watched import WatchedCopy, WatchedPrefix
from yak.security.quota_store import QuotaConfig, quota_prefix

__all__ = ["QuotaOverrides"]

log = logging.getLogger(__name__)


class QuotaOverrides(WatchedCopy):
    """One service's copy of every override, following etcd; see the module docstring."""

    def __init__(
        self, store: MetadataStore, keyspace: Keyspace, clock: Clock | None = None
    ) -> None:
        self._prefix = quota_prefix(keyspace)
        self.overrides: dict[str, QuotaConfig] = {}
        self._watched = WatchedPrefix(
            store, self._prefix, what="quota", load=self._load, apply=self._apply_event, clock=clock
        )

    def _load(self, kvs: Sequence[KeyValue]) -> None:
        self.overrides = {}
        for kv in kvs:
            self._apply(EventKind.PUT, kv.key, kv.value)

    def _apply_event(self, event: WatchEvent) -> None:
        self._apply(event.kind, event.key, event.value)

    def _apply(self, kind: EventKind, key: bytes, value: bytes) -> None:
        principal = key.decode()[len(self._prefix) :]
        self.overrides.pop(principal, None)
        if kind is EventKind.PUT:
            try:
                self.overrides[principal] = QuotaConfig.from_json(value)
            except (ValueError, TypeError, AttributeError) as exc:
                log.error("ignoring malformed quota at %s: %s", key.decode(), exc)
