"""``ConsumerCap``: at most N consumer instances (v2) and group members (native) per principal.

Each member record carries the principal that created it (``GroupMember.principal``, empty for
members made with security off or by an older proxy). Creating one more counts the
principal's live members in etcd — one range read of ``groups/``, members only, on creation
only, never on the data path — and refuses with ``ConsumerQuotaExceededError`` (429
``CONSUMER_QUOTA_EXCEEDED``). The answer changes when the principal deletes an instance or one
expires, not with time; its ``Retry-After`` is the instance timeout, the longest an abandoned
instance of the principal's keeps its place. The count is read, then the member written: two
creations racing on two proxies may pass the cap by one each, as Kafka's
``group.max.size`` is checked per coordinator. Only with security on (an authenticated
principal); with security off every client is one anonymous principal and nothing is capped.
"""

from __future__ import annotations

from yak.errors import ConsumerQuotaExceededError
from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.models import GroupMember
from yak.metadata.store import MetadataStore
from yak_rest_proxy.security.access import current_access

__all__ = ["ConsumerCap"]


class ConsumerCap:
    """Counts members by principal at creation; see the module docstring."""

    def __init__(
        self, store: MetadataStore, keyspace: Keyspace, limit: int, *, retry_after_s: int = 300
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self.limit = limit
        self._retry_after_s = retry_after_s

    async def count(self, principal: str) -> int:
        """How many live members ``principal`` created (every group)."""
        result = await self._store.range_prefix(self._keyspace.groups_prefix)
        count = 0
        for kv in result.kvs:
            parsed = self._keyspace.parse(kv.key)
            if parsed is None or parsed.kind is not KeyKind.GROUP_MEMBER:
                continue
            try:
                if GroupMember.decode(kv.value).principal == principal:
                    count += 1
            except ValueError:
                continue
        return count

    async def admit(self, record: GroupMember) -> GroupMember:
        """``record`` stamped with the request's principal, once it is under its cap."""
        access = current_access.get()
        if access is None:
            return record
        principal = access.principal
        if self.limit > 0:
            held = await self.count(principal)
            if held >= self.limit:
                raise ConsumerQuotaExceededError(
                    f"{principal} holds {held:,} consumer instances; the limit is "
                    f"{self.limit:,} (YAK_MAX_CONSUMERS_PER_PRINCIPAL): delete one first",
                    principal=principal,
                    limit=self.limit,
                    retry_after_s=self._retry_after_s,
                )
        return record.model_copy(update={"principal": principal})
