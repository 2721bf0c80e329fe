"""Share-group administration on the active controller: create, alter, delete; the state topic.

The coordinator is the only writer of ``share-groups/<g>`` (a ``ShareGroupRecord``). The rules
are ``decisions/share_group_rules`` (pure); this driver reads the cache, writes etcd and waits:

- **create** makes sure the share state topic ``__yak_share_state`` exists first (through
  ``TopicAdmin.create_topic``, the user path, with ``internal=True``; a concurrent creation is
  fine), then writes the record create-if-absent, fenced by the controller epoch: a name
  taken, even by a group being deleted, is 409 ``DUPLICATE_RESOURCE``.
- **alter** is a compare-and-swap on the record's ``mod_revision`` (retried on a race).
- **delete** is two fenced writes: mark the record ``deleting`` (CAS), then remove the key
  (CAS on the marked revision). A coordinator that fails between the two leaves the group
  ``deleting``; deleting it again finishes the job.

Hook for the partitions' leaders (the broker side): a leader that sees a group marked
``deleting`` *or* gone from the metadata drops the group's share-partitions and writes a
tombstone for each of their keys in the state topic (``SharePartitionKey.encode()``), held in
memory or not (``yak_broker.share.state_sweep``). A group created again under the same name
has a new ``created_at_ms``, which is part of every state key: state written for an older
incarnation is never loaded for it, and the older keys are tombstoned too.

Reads come from the metadata cache. Single event loop; methods may run concurrently (the
transactions serialise conflicting writes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from yak.clock import Clock
from yak.errors import (
    DuplicateResourceError,
    GroupIdNotFoundError,
    InvalidGroupIdError,
    InvalidReplicationFactorError,
    KafkaTimeoutError,
    NotControllerError,
    TopicAlreadyExistsError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import ShareGroupRecord
from yak.metadata.store import Compare, DeleteOp, MetadataStore, PutOp
from yak.names import validate_group_id
from yak_coordinator.decisions.share_group_rules import (
    SHARE_STATE_TOPIC,
    ShareGroupChanges,
    ShareGroupSettings,
    altered_share_group,
    new_share_group,
    settings_of,
    state_topic_spec,
)
from yak_coordinator.election import Election, fenced_txn
from yak_coordinator.topic_admin import TopicAdmin

__all__ = ["ShareGroupAdmin"]

_CAS_ATTEMPTS = 5


class ShareGroupAdmin:
    """The admin operations on share groups; writes need this coordinator to be controller."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        election: Election,
        topics: TopicAdmin,
        clock: Clock,
        *,
        wait_s: float = 10.0,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._election = election
        self._topics = topics
        self._clock = clock
        self._wait_s = wait_s

    # -- reads ------------------------------------------------------------------------------------

    def list_groups(self) -> list[ShareGroupRecord]:
        groups = self._cache.snapshot.share_groups
        return [groups[name] for name in sorted(groups)]

    def describe(self, name: str) -> ShareGroupRecord:
        record = self._cache.snapshot.share_groups.get(_looked_up(name))
        if record is None:
            raise _not_found(name)
        return record

    # -- writes -----------------------------------------------------------------------------------

    async def create(self, name: str, settings: ShareGroupSettings) -> ShareGroupRecord:
        """Validate and record a new share group (the state topic exists once it returns)."""
        record = new_share_group(name, settings, self._cache.snapshot, self._clock.time_ms())
        await self._ensure_state_topic()
        key = self._keyspace.share_group(name)
        if not await self._put_if(key, Compare.absent(key), value=record.encode()):
            existing = self._cache.snapshot.share_groups.get(name)
            state = " (being deleted)" if existing is not None and existing.deleting else ""
            raise DuplicateResourceError(f"share group {name!r} already exists{state}", group=name)
        return record

    async def alter(self, name: str, changes: ShareGroupChanges) -> ShareGroupRecord:
        """Change some settings (validated with the others, as a whole); the rest stay."""

        def change(record: ShareGroupRecord) -> ShareGroupRecord:
            wanted = changes.applied_to(settings_of(record))
            return altered_share_group(record, wanted, self._cache.snapshot)

        return await self._update(name, change)

    async def delete(self, name: str) -> ShareGroupRecord:
        """Mark the group ``deleting``, then remove its key; the record as it was last."""
        marked = await self._update(
            name, lambda r: r.model_copy(update={"deleting": True}), allow_deleting=True
        )
        key = self._keyspace.share_group(name)
        for _ in range(_CAS_ATTEMPTS):
            kv = await self._store.get(key)
            if kv is None:
                return marked  # removed meanwhile (another delete finished it)
            if ShareGroupRecord.decode(kv.value).deleting and await self._delete_if(
                key, Compare.mod_revision(key, kv.mod_revision)
            ):
                return marked
        raise KafkaTimeoutError(f"share group {name!r} kept changing; retry", group=name)

    # -- internals --------------------------------------------------------------------------------

    async def _ensure_state_topic(self) -> None:
        snapshot = self._cache.snapshot
        if SHARE_STATE_TOPIC in snapshot.topics:
            return
        brokers = sum(1 for b in snapshot.brokers if b not in snapshot.draining)
        if brokers == 0:
            raise InvalidReplicationFactorError(
                f"no broker is registered: the share state topic {SHARE_STATE_TOPIC!r} "
                "cannot be created yet"
            )
        spec = state_topic_spec(brokers)
        with contextlib.suppress(TopicAlreadyExistsError):
            await self._topics.create_topic(
                SHARE_STATE_TOPIC,
                spec.partitions,
                spec.replication_factor,
                spec.configs,
                internal=True,
            )

    async def _update(
        self,
        name: str,
        change: Callable[[ShareGroupRecord], ShareGroupRecord],
        *,
        allow_deleting: bool = False,
    ) -> ShareGroupRecord:
        """Read-modify-write of a group record, compare-and-swap on its mod_revision."""
        key = self._keyspace.share_group(_looked_up(name))
        for _ in range(_CAS_ATTEMPTS):
            kv = await self._store.get(key)
            if kv is None:
                raise _not_found(name)
            record = ShareGroupRecord.decode(kv.value)
            if record.deleting and not allow_deleting:
                raise GroupIdNotFoundError(f"share group {name!r} is being deleted", group=name)
            changed = change(record)
            revision = Compare.mod_revision(key, kv.mod_revision)
            if changed == record or await self._put_if(key, revision, value=changed.encode()):
                return changed
        raise KafkaTimeoutError(f"share group {name!r} kept changing; retry", group=name)

    async def _put_if(self, key: str, compare: Compare, *, value: bytes) -> bool:
        return await self._fenced(compare, PutOp(key, value))

    async def _delete_if(self, key: str, compare: Compare) -> bool:
        return await self._fenced(compare, DeleteOp(key))

    async def _fenced(self, compare: Compare, op: PutOp | DeleteOp) -> bool:
        """Run ``op`` if the fence and ``compare`` hold; wait until the cache shows it."""
        term = self._election.require_term()
        result = await fenced_txn(self._store, self._keyspace, term, [compare], [op])
        if result is None:
            if term.ended:
                raise NotControllerError("this coordinator is no longer the active controller")
            return False
        await self._cache.wait_for_revision(result.revision, self._wait_s)
        return True


def _looked_up(name: str) -> str:
    """``name`` to look up: an illegal one names no group (404, as other lookups answer)."""
    try:
        return validate_group_id(name)
    except InvalidGroupIdError:
        raise _not_found(name) from None


def _not_found(name: str) -> GroupIdNotFoundError:
    return GroupIdNotFoundError(f"share group {name!r} does not exist", group=name)
