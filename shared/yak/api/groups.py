"""Bodies of the native consumer-group API (``/api/v1/groups``): members, polls, commits, admin.

A member joins with a subscription; the coordinator assigns partitions
(``docs/consumer-groups.md``); every answer says the member's current ``member_epoch`` and
assignment. Offsets in commits are the *next* offset to read (Kafka's convention; the v2 API's
"last processed" is the other one).
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yak.api.records import INT32_MAX, INT64_MAX, ConsumedRecord

__all__ = [
    "CommitOffset",
    "CommitRequest",
    "GroupDescription",
    "GroupList",
    "GroupMemberInfo",
    "GroupSummary",
    "JoinGroupRequest",
    "MemberDescription",
    "OffsetResetRequest",
    "OffsetResetResult",
    "PartitionLag",
    "PartitionOffsetChange",
    "PollResponse",
    "SeekPosition",
    "SeekRequest",
    "TopicPartitionList",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JoinGroupRequest(_Body):
    #: Default: generated.
    member_id: str | None = Field(default=None, min_length=1, max_length=249)
    topics: list[str] = Field(default_factory=list)
    topic_pattern: str | None = None
    assignor: Literal["uniform", "range"] = "uniform"
    #: Idle time after which the member leaves the group by itself.
    session_timeout_ms: int = Field(default=30_000, ge=1_000, le=3_600_000)
    #: How long the member may keep a partition the coordinator moved away.
    rebalance_timeout_ms: int = Field(default=60_000, ge=1_000, le=3_600_000)
    auto_offset_reset: Literal["earliest", "latest", "none"] = "latest"
    #: Commit positions at each poll (Kafka's enable.auto.commit); off by default here.
    auto_commit: bool = False

    @model_validator(mode="after")
    def _one_subscription(self) -> Self:
        if bool(self.topics) == (self.topic_pattern is not None):
            raise ValueError("give either topics or topic_pattern (exactly one)")
        return self


class TopicPartitionList(BaseModel):
    topic: str
    partitions: list[int]


class GroupMemberInfo(BaseModel):
    group_id: str
    member_id: str
    member_epoch: int
    assignment: list[TopicPartitionList]


class PollResponse(BaseModel):
    member_epoch: int
    assignment: list[TopicPartitionList]
    records: list[ConsumedRecord]


class CommitOffset(_Body):
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)
    #: The next offset to read.
    offset: int = Field(ge=0, le=INT64_MAX)


class CommitRequest(_Body):
    #: When given, the commit is refused (FENCED_MEMBER_EPOCH) unless it is the member's epoch.
    member_epoch: int | None = None
    #: None: commit every position reached by polling.
    offsets: list[CommitOffset] | None = None


class SeekPosition(_Body):
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)
    offset: int | None = Field(default=None, ge=0, le=INT64_MAX)
    to: Literal["earliest", "latest"] | None = None
    #: The first record at or after this time (ms).
    timestamp: int | None = Field(default=None, ge=0, le=INT64_MAX)


class SeekRequest(_Body):
    partitions: list[SeekPosition] = Field(min_length=1)


class GroupSummary(BaseModel):
    group_id: str
    state: str
    members: int


class GroupList(BaseModel):
    groups: list[GroupSummary]


class MemberDescription(BaseModel):
    member_id: str
    subscription: list[str]
    topic_pattern: str | None
    assignor: str
    member_epoch: int
    owned: list[TopicPartitionList]
    target: list[TopicPartitionList]


class PartitionLag(BaseModel):
    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int
    lag: int
    owner: str | None


class GroupDescription(BaseModel):
    group_id: str
    state: str
    group_epoch: int
    assignor: str
    members: list[MemberDescription]
    partitions: list[PartitionLag]
    total_lag: int


class OffsetResetRequest(_Body):
    """``to``: earliest, latest, a ``timestamp``, one ``offset`` for every partition of
    ``topics``, or ``explicit``: each partition of ``offsets`` to its own offset (Kafka's
    ``--from-file``; ``yak groups offsets import``). Offsets outside a partition's log are
    moved to its nearest end, as Kafka's tool does."""

    to: Literal["earliest", "latest", "timestamp", "offset", "explicit"]
    timestamp: int | None = Field(default=None, ge=0, le=INT64_MAX)
    offset: int | None = Field(default=None, ge=0, le=INT64_MAX)
    #: Default: every topic the group has committed offsets for (not with ``explicit``).
    topics: list[str] | None = Field(default=None, min_length=1)
    #: With ``to="explicit"``: the next offset to read per partition.
    offsets: list[CommitOffset] | None = Field(default=None, min_length=1)
    #: Reset even while the group has members (their positions are not changed).
    force: bool = False
    #: Only show what would change.
    dry_run: bool = False

    @model_validator(mode="after")
    def _explicit_offsets(self) -> Self:
        if (self.to == "explicit") != (self.offsets is not None):
            raise ValueError('give offsets exactly when to is "explicit"')
        for needed in ("offset", "timestamp"):
            if self.to == needed and getattr(self, needed) is None:
                raise ValueError(f'to="{needed}" needs {needed}')
        if self.offsets is not None:
            if self.topics is not None:
                raise ValueError('to="explicit" takes offsets, not topics')
            listed = [(o.topic, o.partition) for o in self.offsets]
            if len(set(listed)) != len(listed):
                raise ValueError("offsets name a partition twice")
        return self


class PartitionOffsetChange(BaseModel):
    topic: str
    partition: int
    previous: int | None
    new: int


class OffsetResetResult(BaseModel):
    dry_run: bool
    partitions: list[PartitionOffsetChange]
