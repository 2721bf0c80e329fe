"""``GroupCoordinator``: the classic groups this broker coordinates, and their offsets
(docs/decisions.md, "Kafka classic groups"; the wire handlers are ``kafka/group_apis.py`` and
``kafka/offset_apis.py``).

- **Routing.** A group is led here when the rendezvous hash (``rendezvous.coordinator_of``)
  over the brokers in the metadata cache picks this broker; any other request for it answers
  NOT_COORDINATOR and the client looks the coordinator up again. One ``GroupDriver`` per group
  led here, created by its first JoinGroup. The hash is checked on every request and before
  every timer tick: a group the hash moved away is unloaded (its parked requests answered
  NOT_COORDINATOR, its marker released) when its members' next heartbeat or its next deadline
  comes, whichever is first — no watch of its own.
- **Offsets** are the REST groups' ``offsets/<g>/<topic>/<p>`` (``CommittedOffset`` with
  ``member_epoch`` = the generation, -1 for a simple commit), written by
  ``ClassicGroupStore.commit`` under the marker. An OffsetCommit for a group never seen here
  with a generation ≥ 0 answers ILLEGAL_GENERATION (Kafka's; its members rejoin), a simple one
  is written only while the group has no marker and no REST member (else UNKNOWN_MEMBER_ID).
- **The marker** goes on this broker's registration lease (read from ``brokers/<id>``): when
  the broker dies, its groups' markers go with it and the new coordinator starts them Empty.

``close()`` unloads every group and stops the timers (the broker stops; its lease's revocation
removes whatever marker is left). Single event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from yak.clock import Clock, SystemClock
from yak.errors import InvalidGroupIdError, MetadataStoreError
from yak.metadata.classic_groups import ClassicGroupStore, GroupDeletion, MarkerClaim
from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.models import BrokerRegistration, ClassicGroupMarker, CommittedOffset
from yak.metadata.store import LeaseExpiredError, MetadataStore
from yak.names import validate_group_id
from yak.protocol.kafka_errors import GroupErrorCode
from yak.types import TopicPartition
from yak_broker.kafka.groups.group_driver import GroupDriver
from yak_broker.kafka.groups.rendezvous import coordinator_of
from yak_broker.kafka.groups.state.records import (
    GroupDescription,
    GroupListing,
    GroupSettings,
    GroupStateName,
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    SyncGroup,
    SyncGroupResult,
)

if TYPE_CHECKING:
    from yak_broker.server.broker import Broker

__all__ = ["GroupCoordinator", "OffsetToCommit"]

_log = logging.getLogger(__name__)
_E = GroupErrorCode


#: The settings ``of_broker`` gives a broker's coordinator (Kafka's broker defaults).
BROKER_GROUP_SETTINGS = GroupSettings()


class OffsetToCommit(NamedTuple):
    """One partition of an OffsetCommit request."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""


class GroupCoordinator:
    """See the module doc."""

    def __init__(
        self,
        broker_id: int,
        brokers: Callable[[], Mapping[int, BrokerRegistration]],
        store: Callable[[], MetadataStore],
        keyspace: Keyspace,
        clock: Clock,
        settings: GroupSettings | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._brokers = brokers
        self._store = store
        self._keyspace = keyspace
        self._clock = clock
        self._settings = settings or GroupSettings()
        self._groups: dict[str, GroupDriver] = {}
        self._lease: int | None = None
        self._closed = False

    @classmethod
    def of_broker(cls, broker: Broker) -> GroupCoordinator:
        """The coordinator of a broker's Kafka listener (its cache's brokers, its store)."""
        return cls(
            broker.settings.broker_id,
            lambda: broker.snapshot().brokers,
            lambda: broker.metadata_store,
            broker.keyspace,
            SystemClock(),
            replace(
                BROKER_GROUP_SETTINGS,
                initial_rebalance_delay_ms=broker.settings.group_initial_rebalance_delay_ms,
            ),
        )

    # --- routing ---------------------------------------------------------------------------

    def coordinator_of(self, group: str) -> BrokerRegistration | None:
        brokers = self._brokers()
        winner = coordinator_of(group, brokers)
        return None if winner is None else brokers[winner]

    def route(self, group: str) -> GroupErrorCode | None:
        """None when ``group`` is led here, else the error to answer (and a group that moved
        is unloaded)."""
        try:
            validate_group_id(group)
        except InvalidGroupIdError:
            return _E.INVALID_GROUP_ID
        if self._closed:
            return _E.COORDINATOR_NOT_AVAILABLE
        if coordinator_of(group, self._brokers()) != self.broker_id:
            driver = self._groups.pop(group, None)
            if driver is not None:
                _log.info("group %s moved to another coordinator; unloading it", group)
                driver.unload()
            return _E.NOT_COORDINATOR
        return None

    def _driver(self, group: str) -> GroupDriver:
        driver = self._groups.get(group)
        if driver is None:
            driver = self._groups[group] = GroupDriver(
                group, self._settings, self._clock, _Markers(self), self._still_led, self._dead
            )
        return driver

    def _still_led(self, driver: GroupDriver) -> bool:
        if self._groups.get(driver.group_id) is not driver:
            return False
        return self.route(driver.group_id) is None

    def _dead(self, driver: GroupDriver) -> None:
        if self._groups.get(driver.group_id) is driver:
            del self._groups[driver.group_id]

    # --- membership ------------------------------------------------------------------------

    async def join(self, group: str, request: JoinGroup) -> JoinGroupResult:
        error = self.route(group)
        if error is not None:
            return JoinGroupResult(error, request.member_id)
        return await self._driver(group).join(request)

    async def sync(self, group: str, request: SyncGroup) -> SyncGroupResult:
        error = self.route(group)
        driver = self._groups.get(group)
        if error is None and driver is None:
            error = _E.UNKNOWN_MEMBER_ID
        if error is not None or driver is None:
            return SyncGroupResult(error or _E.UNKNOWN_MEMBER_ID)
        return await driver.sync(request)

    def heartbeat(self, group: str, request: Heartbeat) -> GroupErrorCode:
        error = self.route(group)
        driver = self._groups.get(group)
        if error is not None or driver is None:
            return error or _E.UNKNOWN_MEMBER_ID
        return driver.heartbeat(request)

    def leave(self, group: str, members: list[LeaveMember]) -> LeaveGroupResult:
        error = self.route(group)
        driver = self._groups.get(group)
        if error is not None:
            return LeaveGroupResult(error)
        if driver is None:
            return LeaveGroupResult(_E.UNKNOWN_MEMBER_ID)
        return driver.leave(members)

    # --- offsets ---------------------------------------------------------------------------

    async def commit(
        self, group: str, identity: Heartbeat, offsets: Mapping[TopicPartition, OffsetToCommit]
    ) -> GroupErrorCode:
        """Check and write an OffsetCommit; one error for all its partitions."""
        error = self.route(group)
        if error is not None:
            return error
        now = self._clock.time_ms()
        marks = {
            tp: CommittedOffset(
                offset=o.offset,
                metadata=o.metadata,
                leader_epoch=o.leader_epoch,
                member_epoch=identity.generation_id if identity.generation_id >= 0 else -1,
                commit_time_ms=now,
            )
            for tp, o in offsets.items()
        }
        offsets_store = ClassicGroupStore(self._store(), self._keyspace)

        async def write(revision: int) -> bool:
            return await offsets_store.commit(group, revision, marks)

        driver = self._groups.get(group)
        try:
            if driver is None:
                if identity.generation_id >= 0:
                    return _E.ILLEGAL_GENERATION
                return _E.NONE if await write(0) else _E.UNKNOWN_MEMBER_ID
            error = await driver.commit(identity, write)
        except MetadataStoreError as exc:
            _log.warning("group %s: commit failed: %s", group, exc)
            return _E.COORDINATOR_NOT_AVAILABLE
        if error is _E.NOT_COORDINATOR and self._groups.get(group) is driver:
            del self._groups[group]
            driver.unload()
        return error

    async def committed(
        self, group: str
    ) -> tuple[GroupErrorCode, dict[TopicPartition, CommittedOffset]]:
        error = self.route(group)
        if error is not None:
            return error, {}
        try:
            return _E.NONE, await ClassicGroupStore(self._store(), self._keyspace).committed(group)
        except MetadataStoreError:
            return _E.COORDINATOR_NOT_AVAILABLE, {}

    # --- admin -----------------------------------------------------------------------------

    async def describe(self, group: str) -> tuple[GroupErrorCode, GroupDescription]:
        error = self.route(group)
        driver = self._groups.get(group)
        if error is None and driver is not None:
            return _E.NONE, driver.machine.describe()
        state = GroupStateName.DEAD
        if error is None:
            error, offsets = await self.committed(group)
            state = GroupStateName.EMPTY if offsets else GroupStateName.DEAD
        return error, GroupDescription(group, state, "", "", ())

    async def list_groups(self) -> list[GroupListing]:
        """The classic groups led here and the REST groups this broker wins by the hash (so a
        client asking every broker sees each group once)."""
        listed = {g: d.machine.listing() for g, d in self._groups.items()}
        read = await self._store().range_prefix(self._keyspace.groups_prefix)
        with_members: set[str] = set()
        for kv in read.kvs:
            parsed = self._keyspace.parse(kv.key)
            if parsed is not None and parsed.group is not None:
                if parsed.kind is KeyKind.GROUP_MEMBER:
                    with_members.add(parsed.group)
                elif parsed.kind is KeyKind.GROUP_STATE:
                    listed.setdefault(parsed.group, _rest(parsed.group, GroupStateName.EMPTY))
        for group in with_members:
            listed[group] = _rest(group, GroupStateName.STABLE)
        me = self.broker_id
        brokers = self._brokers()
        return [
            listing
            for group, listing in sorted(listed.items())
            if group in self._groups or coordinator_of(group, brokers) == me
        ]

    async def delete(self, group: str) -> GroupErrorCode:
        error = self.route(group)
        if error is not None:
            return error
        driver = self._groups.get(group)
        if driver is not None:
            error = driver.delete()
            if error is not _E.NONE:
                return error
            await driver.settle()  # its marker's release
        try:
            deleted = await ClassicGroupStore(self._store(), self._keyspace).delete(group)
        except MetadataStoreError:
            return _E.COORDINATOR_NOT_AVAILABLE
        if deleted is GroupDeletion.NOT_EMPTY:
            return _E.NON_EMPTY_GROUP
        if deleted is GroupDeletion.NOT_FOUND and driver is None:
            return _E.GROUP_ID_NOT_FOUND
        return _E.NONE

    async def close(self) -> None:
        """Unload every group and stop its timer (the broker stops)."""
        self._closed = True
        drivers, self._groups = list(self._groups.values()), {}
        for driver in drivers:
            driver.unload()
        for driver in drivers:
            await driver.close()

    # --- the marker's lease ----------------------------------------------------------------

    async def lease(self, *, fresh: bool = False) -> int:
        """This broker's registration lease (the markers' lease)."""
        if self._lease is None or fresh:
            kv = await self._store().get(self._keyspace.broker(self.broker_id))
            if kv is None or not kv.lease:
                raise MetadataStoreError(f"broker {self.broker_id} is not registered")
            self._lease = kv.lease
        return self._lease

    def marker_store(self) -> ClassicGroupStore:
        return ClassicGroupStore(self._store(), self._keyspace)


class _Markers:
    """``MarkerOps`` on the coordinator's lease; a lost lease is read again once."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    async def claim(self, group: str, protocol_type: str, generation: int) -> MarkerClaim:
        coordinator = self._coordinator
        marker = ClassicGroupMarker(
            broker_id=coordinator.broker_id, protocol_type=protocol_type, generation=generation
        )
        try:
            return await coordinator.marker_store().claim(group, marker, await coordinator.lease())
        except LeaseExpiredError:
            lease = await coordinator.lease(fresh=True)
            return await coordinator.marker_store().claim(group, marker, lease)

    async def release(self, group: str, revision: int) -> bool:
        return await self._coordinator.marker_store().release(group, revision)


def _rest(group: str, state: GroupStateName) -> GroupListing:
    return GroupListing(group, "consumer", state)
