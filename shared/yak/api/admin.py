"""Request and response bodies of the coordinator's admin API (``/admin/v1``).

These pydantic models are the boundary: the coordinator validates requests with them and the
typed client (``yak.clients.admin``) parses responses with them. Errors use the common body
``{"code", "message", "details"}`` of ``yak.web.errors``. Unknown fields in responses are
ignored so that an older client keeps working against a newer coordinator.

Topic config values are strings with Kafka's names (``retention.ms``: ``"604800000"``); the
catalogue of accepted names and ranges is ``yak.topic_config``.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from yak.api.json_int import JsonInt, PartitionJsonInt
from yak.api.log_dirs import (
    BrokerLogDir,
    BrokerTopicLogs,
    LogDirs,
    ReplicaLog,
    TopicLog,
    TopicLogDirs,
)

__all__ = [
    "ADMIN_PREFIX",
    "MAX_PARTITIONS",
    "AlterConfigsRequest",
    "AssignedPartitions",
    "BrokerForgotten",
    "BrokerInfo",
    "BrokerLoadInfo",
    "BrokerLogDir",
    "BrokerStatus",
    "BrokerTopicLogs",
    "ClusterInfo",
    "ControllerInfo",
    "CreatePartitionsRequest",
    "CreateTopicRequest",
    "DecommissionList",
    "DecommissionStatus",
    "ElectLeadersRequest",
    "ElectLeadersResult",
    "ElectionResult",
    "GroupDescription",
    "GroupList",
    "GroupMemberDescription",
    "GroupSummary",
    "LogDirs",
    "PartitionHealth",
    "PartitionHealthList",
    "PartitionInfo",
    "PartitionOffset",
    "PartitionReassignment",
    "ReassignmentList",
    "ReassignmentRequest",
    "ReplicaLog",
    "TopicDeleted",
    "TopicDescription",
    "TopicDescriptionList",
    "TopicList",
    "TopicLog",
    "TopicLogDirs",
    "TopicPartitionRef",
    "TopicSummary",
]

#: Path prefix of every admin route.
ADMIN_PREFIX = "/admin/v1"

#: Largest partition count one topic may have (a sanity bound, Kafka has none).
MAX_PARTITIONS = 10_000


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CreateTopicRequest(_Request):
    """``POST /topics``. ``replication_factor`` omitted: the cluster default (1, as Kafka's
    ``default.replication.factor``)."""

    name: str
    partitions: int = Field(default=1, description="Number of partitions (1 to 10,000).")
    replication_factor: int | None = Field(
        default=None, description="Replicas per partition; at most the live broker count."
    )
    configs: dict[str, str] = Field(default_factory=dict)


class AlterConfigsRequest(_Request):
    """``PATCH /topics/{name}/configs``: set some overrides and remove others (to defaults)."""

    set: dict[str, str] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)


class CreatePartitionsRequest(_Request):
    """``POST /topics/{name}/partitions``: the new total partition count (only increases)."""

    count: int


class PartitionInfo(_Body):
    """One partition: its leader (-1: none), epochs, replica list and in-sync replicas."""

    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    adding_replicas: list[int] = []
    removing_replicas: list[int] = []


class ReassignmentRequest(_Request):
    """``PUT /topics/{name}/partitions/{p}/reassignment``: the partition's new replica list
    (the first is the preferred leader)."""

    replicas: list[JsonInt] = Field(min_length=1)  # JSON's false is not broker 0


class PartitionReassignment(PartitionInfo):
    """A partition being moved: ``replicas`` is the target followed by ``removing_replicas``;
    ``adding_replicas`` are not all in the ISR yet."""

    topic: str


class ReassignmentList(_Body):
    """``GET /reassignments``: the partitions being reassigned, by topic and partition."""

    reassignments: list[PartitionReassignment]


class TopicPartitionRef(_Request):
    """One partition of one topic."""

    topic: str
    partition: PartitionJsonInt  # JSON's false is not partition 0


class ElectLeadersRequest(_Request):
    """``POST /elect-leaders``: move leadership back to the preferred replica (``replicas[0]``)
    of these partitions; omitted or null: of every partition (Kafka's ElectLeaders, PREFERRED).
    """

    partitions: list[TopicPartitionRef] | None = None


class ElectionResult(_Body):
    """One partition's election: its leader afterwards, and ``error`` when nothing was done —
    ``ELECTION_NOT_NEEDED`` (the preferred replica leads), ``PREFERRED_LEADER_NOT_AVAILABLE``
    (it is dead, out of the ISR, shutting down or draining) or
    ``UNKNOWN_TOPIC_OR_PARTITION``."""

    topic: str
    partition: int
    leader: int
    error: str | None = None


class ElectLeadersResult(_Body):
    """``POST /elect-leaders``: one result per partition asked for, by topic and partition."""

    results: list[ElectionResult]


class DecommissionStatus(_Body):
    """A broker being drained (``PUT /brokers/{id}/decommission``, ``GET /decommissions``).

    ``replicas``: partitions that still list it (``moving`` of them are being reassigned off
    it, ``blocked`` say why they cannot move now); ``leaders``: partitions it still leads.
    ``done``: nothing is left on it — it can be stopped with nothing under-replicated.
    ``decommissioning`` is false in the answer to a recommission.
    """

    broker_id: int
    decommissioning: bool = True
    alive: bool
    requested_at_ms: int | None = None
    leaders: int
    replicas: int
    moving: int
    blocked: list[str] = []
    done: bool


class DecommissionList(_Body):
    """``GET /decommissions``: every broker being drained, by id."""

    brokers: list[DecommissionStatus]


class PartitionHealth(_Body):
    """A partition that needs attention (``GET /partitions?state=...``).

    ``offline``: no leader; ``under_replicated``: fewer in-sync replicas than replicas;
    ``under_min_isr``: fewer in-sync replicas than ``min.insync.replicas`` (acks=all refused).
    """

    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    min_insync_replicas: int
    offline: bool
    under_replicated: bool
    under_min_isr: bool


class PartitionHealthList(_Body):
    partitions: list[PartitionHealth]


class TopicSummary(_Body):
    """One line of ``GET /topics``."""

    name: str
    partitions: int
    replication_factor: int
    deleting: bool = False


class TopicList(_Body):
    """``GET /topics``: every topic, by name."""

    topics: list[TopicSummary]


class TopicDescription(_Body):
    """``GET /topics/{name}``: the topic, its config overrides and its partitions' state."""

    name: str
    topic_id: str
    partition_count: int
    replication_factor: int
    configs: dict[str, str]
    deleting: bool = False
    partitions: list[PartitionInfo]


class TopicDescriptionList(_Body):
    """``GET /api/v1/topic-descriptions``: many topics described in one answer (Kafka's
    DescribeTopics for a collection), by name; a name asked for that does not exist is left out."""

    topics: list[TopicDescription]


class TopicDeleted(_Body):
    """``DELETE /topics/{name}``: ``deleted`` is false while the controller is still at it."""

    name: str
    deleted: bool


class BrokerStatus(StrEnum):
    """A known broker's status: registered (``up``, or ``shutting_down`` in controlled
    shutdown) or not (``down``: its registration vanished; it is known from its record)."""

    UP = "up"
    SHUTTING_DOWN = "shutting_down"
    DOWN = "down"


class BrokerLoadInfo(_Body):
    """A broker's latest load sample, as its registration carries it (``BrokerLoad``): CPU in
    cores and records appended per second over its sampling window, resident memory, the used
    fraction of its data folder's filesystem. ``stale``: older than three of its publish
    intervals when the answering server read it (the load-aware partitioners ignore it)."""

    cpu: float
    memory_bytes: int
    disk_used_ratio: float
    records_per_second: float
    sampled_at_ms: int
    publish_interval_ms: int
    stale: bool = False


class BrokerInfo(_Body):
    """A broker the cluster knows: registered now, or known from its ``broker-records/`` entry.

    ``last_seen_ms`` is the answering server's time for a registered broker ("now"), and for a
    down one the moment its registration vanished, as the controller recorded it (None for the
    moment between the vanishing and the controller's record of it, or while no controller is
    elected to record it)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    status: BrokerStatus = BrokerStatus.UP
    #: ``status == shutting_down``, kept for clients older than ``status``.
    shutting_down: bool = False
    #: Being drained by ``yak brokers decommission`` (gets no new replicas, leads nothing).
    decommissioning: bool = False
    last_seen_ms: int | None = None
    #: When the cluster first saw this broker id registered (None: not recorded yet).
    first_registered_ms: int | None = None
    #: When the process of its last registration started.
    started_at_ms: int | None = None
    #: Its latest load sample (None: down, or it published none yet).
    load: BrokerLoadInfo | None = None
    #: Its public Kafka listener, ``host:port`` (None: down, or it has none open).
    kafka: str | None = None


class BrokerForgotten(_Body):
    """``DELETE /brokers/{id}``: the broker's record (and any decommission mark) is gone."""

    broker_id: int
    #: When it was last seen registered, as its record said (None: it had no record).
    last_seen_ms: int | None = None


class PartitionOffset(_Body):
    """ListOffsets of one partition: the log start (earliest), the high watermark (latest), or
    for a timestamp the first offset of the batch holding the first record at or after it
    (-1 when there is none; records are not decoded, so a batch's earlier records may precede
    it, as in Kafka's ListOffsets before v1)."""

    topic: str
    partition: int
    offset: int


class ControllerInfo(_Body):
    """The active coordinator and its controller epoch."""

    coordinator_id: str
    url: str
    epoch: int


class ClusterInfo(_Body):
    """``GET /cluster``: the brokers (live and down), who controls, and how much there is."""

    cluster_id: str
    coordinator_id: str
    controller: ControllerInfo | None
    brokers: list[BrokerInfo]
    topic_count: int
    partition_count: int
    offline_partition_count: int
    under_replicated_partition_count: int = 0
    under_min_isr_partition_count: int = 0


class AssignedPartitions(_Body):
    """Some partitions of one topic."""

    topic: str
    partitions: list[int]


class GroupSummary(_Body):
    """One line of ``GET /groups``: ``state`` is Kafka's name (``Empty``, ``Stable``, ...)."""

    group_id: str
    state: str
    member_count: int


class GroupList(_Body):
    """``GET /groups``: every consumer group, by id."""

    groups: list[GroupSummary]


class GroupMemberDescription(_Body):
    """A member of a group (``docs/consumer-groups.md``).

    ``target`` is what the assignor gives it, ``current`` what it may own now (its target
    minus partitions another member has not released yet), ``owned`` what it acknowledged.
    ``member_epoch`` is the epoch of ``current`` (-1: takes no part in the assignment),
    ``acknowledged_epoch`` the epoch of ``owned``. ``revoking_since_ms``: since when it has been
    asked to release partitions (it is removed after its rebalance timeout).
    """

    member_id: str
    client_id: str = ""
    client_host: str = ""
    subscription: list[str] = []
    subscription_pattern: str | None = None
    manual_assignment: list[AssignedPartitions] = []
    assignor: str
    owned: list[AssignedPartitions] = []
    target: list[AssignedPartitions] = []
    current: list[AssignedPartitions] = []
    member_epoch: int = -1
    acknowledged_epoch: int = 0
    revoking_since_ms: int | None = None


class GroupDescription(_Body):
    """``GET /groups/{group}``: the group's state, epochs, assignor and members by id.

    ``state`` is ``PreparingRebalance`` while the live members differ from what the stored
    assignment was computed from.
    """

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[GroupMemberDescription]
