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
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AlterShareGroupRequest",
    "CreateShareGroupRequest",
    "ShareGroupDeleted",
    "ShareGroupDescription",
    "ShareGroupList",
    "ShareOffsetResetName",
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


class ShareGroupList(_Body):
    """``GET /share-groups``: every share group the caller may describe, by name."""

    share_groups: list[ShareGroupDescription]


class ShareGroupDeleted(_Body):
    """``DELETE /share-groups/{group}``: the group is gone; its last settings."""

    name: str
    group: ShareGroupDescription
