"""Typed values of the etcd keyspace (one model per key kind in ``keyspace.py``).

Values are JSON (orjson) and validated on read: etcd is a boundary like HTTP, so these are
pydantic models, frozen. Unknown fields are ignored so that a newer writer does not break an
older reader during a rolling upgrade; missing required fields fail loudly.

Times are milliseconds since the Unix epoch; ``-1`` stands for "none" where Kafka uses it
(a partition with no leader has ``leader == -1``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "NO_LEADER",
    "AclEntry",
    "BrokerRegistration",
    "CommittedOffset",
    "ControllerRecord",
    "GroupMember",
    "GroupPositions",
    "GroupState",
    "GroupStateName",
    "MetadataValue",
    "PartitionState",
    "Principal",
    "ProducerIdBlock",
    "TopicPartitions",
    "TopicRecord",
]

NO_LEADER = -1


class MetadataValue(BaseModel):
    """Base of every stored value: frozen, JSON in and out."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def encode(self) -> bytes:
        """The value as stored in etcd (compact JSON, UTF-8)."""
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> Self:
        """Parse and validate a stored value; raises pydantic.ValidationError if malformed."""
        return cls.model_validate_json(raw)


class BrokerRegistration(MetadataValue):
    """``brokers/<id>``: a live broker, on its lease (gone when the lease expires)."""

    broker_id: int = Field(ge=0)
    host: str
    port: int = Field(ge=1, le=65535)
    rack: str | None = None
    started_at_ms: int
    #: Bumped on each process start so a restarted broker is told apart from a zombie.
    incarnation: str = ""
    #: Set by a broker stopping on SIGTERM (controlled shutdown): the controller moves its
    #: leaderships to other in-sync replicas and elects it for nothing.
    shutting_down: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class ControllerRecord(MetadataValue):
    """``controller``: the active coordinator, on its election lease."""

    coordinator_id: str
    host: str
    port: int = Field(ge=1, le=65535)
    #: Increases on every election; decisions carry it so a deposed controller is fenced.
    epoch: int = Field(ge=0)
    elected_at_ms: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class TopicRecord(MetadataValue):
    """``topics/<name>``: a topic's shape and its config overrides (Kafka names, as strings)."""

    name: str
    topic_id: str
    partitions: int = Field(ge=1)
    replication_factor: int = Field(ge=1)
    configs: dict[str, str] = Field(default_factory=dict)
    created_at_ms: int
    #: Set when deletion starts; brokers drop their logs, then the coordinator removes the key.
    deleting: bool = False


class PartitionState(MetadataValue):
    """``partitions/<topic>/<p>``: leadership and replica sets of one partition.

    ``partition_epoch`` increases on every change; the ISR is changed by the leader with a
    compare-and-swap on it (Kafka's AlterPartition). ``leader_epoch`` increases when the
    leader changes.
    """

    topic: str
    partition: int = Field(ge=0)
    leader: int = NO_LEADER
    leader_epoch: int = Field(default=0, ge=0)
    partition_epoch: int = Field(default=0, ge=0)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: A reassignment in progress (Kafka's AlterPartitionReassignments): ``replicas`` is the
    #: target followed by the replicas being removed; both lists are empty otherwise.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (``replicas`` when none runs)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment (``replicas`` when none runs)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


class GroupMember(MetadataValue):
    """``groups/<g>/members/<member>``: a consumer in a group, on its session lease."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    subscription: tuple[str, ...] = ()
    session_timeout_ms: int = Field(default=45_000, ge=1)
    rebalance_timeout_ms: int = Field(default=300_000, ge=1)
    joined_at_ms: int


class TopicPartitions(MetadataValue):
    """A set of partitions of one topic."""

    topic: str
    partitions: tuple[int, ...]


class GroupStateName(StrEnum):
    """The lifecycle of a consumer group (KIP-848 vocabulary)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupState(MetadataValue):
    """``groups/<g>/state``: the group epoch and the target assignment per member."""

    group_id: str
    group_epoch: int = Field(default=0, ge=0)
    assignment_epoch: int = Field(default=0, ge=0)
    state: GroupStateName = GroupStateName.EMPTY
    target_assignment: dict[str, tuple[TopicPartitions, ...]] = Field(default_factory=dict)
    #: The epoch each member has acknowledged; a member fetches and commits with it.
    member_epochs: dict[str, int] = Field(default_factory=dict)


class GroupPositions(MetadataValue):
    """``groups/<g>/positions/<member>``: a member's fetch positions ("topic/p" → offset)."""

    member_id: str
    member_epoch: int = Field(ge=0)
    positions: dict[str, int] = Field(default_factory=dict)


class CommittedOffset(MetadataValue):
    """``offsets/<g>/<topic>/<p>``: a committed offset, fenced by the committing member epoch."""

    offset: int = Field(ge=0)
    metadata: str = ""
    leader_epoch: int = -1
    member_epoch: int = -1
    commit_time_ms: int


class ProducerIdBlock(MetadataValue):
    """``producers/next-id``: the next unallocated producer id (allocated in blocks by CAS)."""

    next_id: int = Field(ge=0)


class Principal(MetadataValue):
    """``security/principals/<name>``: an API-key principal (only a salted hash is stored)."""

    name: str
    key_hash: str
    salt: str
    created_at_ms: int


class AclEntry(MetadataValue):
    """``security/acls/<id>``: allow or deny an operation on a resource to a principal."""

    principal: str
    resource_type: str
    resource_name: str
    pattern_type: str = "literal"
    operation: str
    permission: str = "allow"
