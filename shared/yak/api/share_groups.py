"""Bodies of the share-group admin API: the coordinator's ``/admin/v1/share-groups`` and the
rest-proxy's ``/api/v1/share-groups`` (the proxy forwards, so both speak these models).

A share group (KIP-932: queue semantics over topic partitions) has four settings:
``dead_letter_topic`` (where a record goes once rejected or past the delivery limit; None:
it is archived), ``max_delivery_attempts`` (1-100, default 5), ``lock_duration_ms`` (how long
a member holds an acquired record, 1 s-1 h, default 30 s) and ``offset_reset`` (where a
share-partition starts when the group first reads it: ``earliest`` or ``latest``, the
default). The bounds are checked by the coordinator, which answers 400 ``INVALID_CONFIG``
naming the bound; this module only shapes the bodies.

``PATCH`` changes the settings present in the body (JSON merge-patch style): a setting left
out stays, ``"dead_letter_topic": null`` removes the dead-letter topic.

Live state: each broker answers ``GET /v1/share-groups/{group}`` with the group's
share-partitions it leads (``ShareGroupLeaderState``); the rest-proxy sums every broker's
answer into the description's ``live`` part (``ShareGroupLive``: per share-partition, per topic
counters, totals, brokers that did not answer). Counters count since the brokers started.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AlterShareGroupRequest",
    "CreateShareGroupRequest",
    "ShareBrokerError",
    "ShareGroupDeleted",
    "ShareGroupDescription",
    "ShareGroupLeaderState",
    "ShareGroupList",
    "ShareGroupLive",
    "ShareGroupTotals",
    "ShareOffsetResetName",
    "SharePartitionState",
    "ShareTopicCounters",
]

#: Where a new share-partition starts reading.
ShareOffsetResetName = Literal["earliest", "latest"]


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class CreateShareGroupRequest(_Request):
    """``POST /share-groups``."""

    name: str
    dead_letter_topic: str | None = Field(
        default=None, description="An existing topic; none: records past the limit are archived."
    )
    max_delivery_attempts: int = Field(default=5, description="1 to 100.")
    lock_duration_ms: int = Field(default=30_000, description="1,000 to 3,600,000.")
    offset_reset: ShareOffsetResetName = "latest"


class AlterShareGroupRequest(_Request):
    """``PATCH /share-groups/{group}``: only the settings present change."""

    dead_letter_topic: str | None = Field(default=None, description="null: remove it.")
    max_delivery_attempts: int | None = Field(default=None, description="1 to 100.")
    lock_duration_ms: int | None = Field(default=None, description="1,000 to 3,600,000.")
    offset_reset: ShareOffsetResetName | None = None

    @property
    def clears_dead_letter_topic(self) -> bool:
        """Whether the body removes the dead-letter topic (``"dead_letter_topic": null``)."""
        return "dead_letter_topic" in self.model_fields_set and self.dead_letter_topic is None


class ShareGroupDescription(_Body):
    """A share group and its settings (``GET /share-groups/{group}``)."""

    name: str
    created_at_ms: int
    dead_letter_topic: str | None
    max_delivery_attempts: int
    lock_duration_ms: int
    offset_reset: ShareOffsetResetName
    #: True between the two steps of a deletion (DELETE again to finish it).
    deleting: bool = False
    #: What the partitions' leaders hold now (filled by the rest-proxy; the coordinator,
    #: which holds only the settings, answers None).
    live: ShareGroupLive | None = None


class SharePartitionState(_Body):
    """One share-partition as its leader holds it now. A share-partition is loaded on its
    first acquire or acknowledgement since the broker became the partition's leader; until
    then (``loaded`` false) only the high watermark is known."""

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    loaded: bool
    high_watermark: int
    start_offset: int | None = Field(default=None, description="SPSO: all below is done.")
    scan_offset: int | None = Field(default=None, description="Next offset to read from the log.")
    in_flight: int = 0
    available: int = 0
    acquired: int = 0
    #: Acknowledged records still in the window (above a record not yet done).
    acknowledged: int = 0
    archived: int = 0
    dead_letter_pending: int = 0
    oldest_unacked_timestamp_ms: int | None = None
    acquired_by_member: dict[str, int] = Field(default_factory=dict)
    #: Delivery count -> records not yet acknowledged that were delivered that often.
    delivery_counts: dict[int, int] = Field(default_factory=dict)
    #: Records between SPSO and the high watermark neither acknowledged nor archived (an upper
    #: bound: offsets the log no longer holds count); None when not loaded.
    lag: int | None = None


class ShareTopicCounters(_Body):
    """A group's counters for one topic since the brokers started (``/metrics``' counters)."""

    topic: str
    acquired: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    renewed: int = 0
    expired: int = 0
    dead_lettered: int = 0


class ShareGroupLeaderState(_Body):
    """A broker's ``GET /v1/share-groups/{group}``: the group's share-partitions it leads and
    its counters there."""

    broker_id: int
    group: str
    partitions: list[SharePartitionState]
    topics: list[ShareTopicCounters]


class ShareBrokerError(_Body):
    """A broker that did not answer (its share-partitions are missing from the answer)."""

    broker_id: int
    error: str


class ShareGroupTotals(_Body):
    """The group's figures summed over its share-partitions and topics."""

    in_flight: int = 0
    available: int = 0
    acquired: int = 0
    #: Records accepted since the brokers started.
    acknowledged: int = 0
    dead_lettered: int = 0
    dead_letter_pending: int = 0
    lag: int = 0
    oldest_unacked_timestamp_ms: int | None = None


class ShareGroupLive(_Body):
    """The live part of a share group's description, summed over every broker's answer."""

    totals: ShareGroupTotals
    partitions: list[SharePartitionState]
    topics: list[ShareTopicCounters]
    errors: list[ShareBrokerError] = Field(default_factory=list)


class ShareGroupList(_Body):
    """``GET /share-groups``: every share group the caller may describe, by name."""

    share_groups: list[ShareGroupDescription]


class ShareGroupDeleted(_Body):
    """``DELETE /share-groups/{group}``: the group is gone; its last settings."""

    name: str
    group: ShareGroupDescription
