"""``KafkaSecurity``: what a SASL Kafka listener authenticates and authorizes with.

Built by the listener when its security protocol is ``SASL_PLAINTEXT`` or ``SASL_SSL``
(``BrokerSettings.kafka_protocol``), from the broker's metadata store: one ``SecurityCache``
— the cluster's users, their password hashes and SCRAM credentials, API keys and ACLs, kept
current by one etcd watch exactly as the rest-proxy's is, so a new ACL or a changed password
takes effect on the Kafka listener within milliseconds too — with the broker's super-users
and a ``FailedLoginLimiter`` (too many failed SASL/PLAIN logins of one user: refused for a
while, as over HTTP). The mechanisms offered are PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
Started before the listener accepts, stopped after it closes. Single event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from yak.security.cache import SecurityCache
from yak.security.login_limiter import FailedLoginLimiter
from yak.security.scram import MECHANISMS as SCRAM_MECHANISMS

if TYPE_CHECKING:
    from yak_broker.server.broker import Broker

__all__ = ["MECHANISMS", "KafkaSecurity"]

#: The SASL mechanisms the Kafka listener offers, in the order SaslHandshake lists them.
MECHANISMS: tuple[str, ...] = ("PLAIN", *sorted(SCRAM_MECHANISMS))


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """The users and ACLs a SASL listener checks against (see the module docstring)."""

    cache: SecurityCache
    mechanisms: tuple[str, ...] = MECHANISMS

    @classmethod
    def of_broker(cls, broker: Broker) -> KafkaSecurity:
        cache = SecurityCache(
            broker.metadata_store,
            broker.keyspace,
            super_users=broker.settings.super_users,
            login_limiter=FailedLoginLimiter(),
        )
        return cls(cache)

    async def start(self) -> None:
        """Load the users and ACLs (MetadataStoreError if etcd is down), then follow them."""
        await self.cache.start()

    async def stop(self) -> None:
        await self.cache.stop()
