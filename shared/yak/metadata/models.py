"""Typed values of the etcd keyspace (one model per key kind in ``keyspace.py``).

Values are JSON (orjson) and validated on read: etcd is a boundary like HTTP, so these are
pydantic models, frozen. Unknown fields are ignored so that a newer writer does not break an
older reader during a rolling upgrade (``BrokerRecord`` keeps them, so that a rewrite by an
older writer does not drop them); missing required fields fail loudly.

Times are milliseconds since the Unix epoch; ``-1`` stands for "none" where Kafka uses it
(a partition with no leader has ``leader == -1``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

__all__ = [
    "NO_LEADER",
    "SHARE_LOCK_DURATION_MS",
    "SHARE_MAX_DELIVERY_ATTEMPTS",
    "AclEntry",
    "Assignment",
    "BrokerDecommission",
    "BrokerLoad",
    "BrokerRecord",
    "BrokerRegistration",
    "ClassicGroupMarker",
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
    "ShareGroupRecord",
    "ShareOffsetReset",
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


class BrokerLoad(MetadataValue):
    """A broker process's load, sampled by the broker and carried in its registration.

    Written by ``yak_broker.server.load_sampler`` at most every ``publish_interval_ms`` and
    read by the ``load_aware`` partitioners (``yak.partitioner``) and the console. A reader
    counts a sample older than three ``publish_interval_ms`` as stale (its broker scores as the
    cluster's average): the broker republishes a steady sample well before that.
    """

    #: CPU time of the process over the last sampling window, in cores (1.0: one core busy).
    cpu: float = Field(ge=0)
    #: Resident set size of the process, bytes.
    memory_bytes: int = Field(ge=0)
    #: Used fraction of the filesystem holding the broker's data folder (0..1).
    disk_used_ratio: float = Field(ge=0, le=1)
    #: Records appended by producers to partitions this broker leads, per second, over the
    #: last sampling window.
    records_per_second: float = Field(ge=0)
    #: When the sample was taken (the broker's wall clock, ms since the epoch).
    sampled_at_ms: int
    #: The broker's ``load_publish_interval_ms``: readers judge staleness by it.
    publish_interval_ms: int = Field(default=5_000, ge=1)

    def stale(self, now_ms: int) -> bool:
        """Whether a reader at ``now_ms`` should ignore the sample (older than three
        publish intervals)."""
        return now_ms - self.sampled_at_ms > 3 * self.publish_interval_ms


class BrokerRegistration(MetadataValue):
    """``brokers/<id>``: a live broker, on its lease (gone when the lease expires)."""

    broker_id: int = Field(ge=0)
    host: str
    port: int = Field(ge=1, le=65535)
    rack: str | None = None
    started_at_ms: int
    #: Bumped on each process start so a restarted broker is told apart from a zombie.
    incarnation: str = ""
    #: The id of the broker's data folder (``directory.id`` in its ``meta.properties``, KIP-858):
    #: new whenever the folder starts empty, so a broker whose log was lost is told apart
    #: from one that kept it; the controller elects a replica only if its ISR entry names
    #: this id (``PartitionState.isr_log_dirs``). "" from a broker older than the field.
    log_dir_id: str = ""
    #: Set by a broker stopping on SIGTERM (controlled shutdown): the controller moves its
    #: leaderships to other in-sync replicas and elects it for nothing.
    shutting_down: bool = False
    #: The ids of this broker's data folders that failed (a full disk, an I/O error: KIP-112,
    #: Kafka's ``OfflineLogDirs`` of KIP-858): the controller moves the leaderships of the
    #: replicas in them to in-sync replicas and drops the broker from their ISRs, as for a
    #: dead broker, until the broker clears the mark. Empty: every folder is online.
    offline_log_dirs: tuple[str, ...] = ()
    #: ``https`` when the broker's listener speaks TLS (``YAK_TLS_CERT``).
    scheme: Literal["http", "https"] = "http"
    #: The internal listener (Kafka framing: produce, fetch, replication) on ``host``; None
    #: for a broker that has none (clients then use HTTP).
    data_port: int | None = Field(default=None, ge=1, le=65535)
    #: The public Kafka listener (Kafka's own clients) at ``kafka_host`` (None: ``host``);
    #: None for a broker without one (older, or in a mode that keeps it closed: see
    #: docs/kafka-protocol.md).
    kafka_host: str | None = None
    kafka_port: int | None = Field(default=None, ge=1, le=65535)
    #: The broker's latest load sample (None: a broker older than the field, or none taken
    #: yet). Rewritten on the same lease at a bounded rate (``BrokerLoad``).
    load: BrokerLoad | None = None

    @field_validator("load", mode="wrap")
    @classmethod
    def _load_or_none(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        """A malformed sample (a newer writer's shape) reads as none: it never hides a live
        broker from a reader."""
        try:
            return handler(value)
        except ValidationError:
            return None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


class BrokerRecord(MetadataValue):
    """``broker-records/<id>``: a broker the cluster has known, kept after it leaves.

    Not on a lease, unlike ``brokers/<id>``: like a registration in Kafka's KRaft metadata,
    which stays (fenced) after the broker stops until it is unregistered, the record stays
    until ``yak brokers forget`` deletes it. The active controller writes it: when a
    registration appears that the record does not describe (a new broker, a restart: new
    ``incarnation``, a new address), and when the registration it describes vanishes. A
    broker that stays registered costs no write (see
    ``yak_coordinator.decisions.broker_record_rules``).

    Fields unknown to this version are kept when a record is rewritten (``extra="allow"``),
    so a field added later (issue 21 item 2: the broker epoch and the log directory id of
    the last registration) survives a rolling upgrade in which an older controller rewrites
    the record.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    broker_id: int = Field(ge=0)
    #: Where the last registration said the broker listens.
    host: str
    port: int = Field(ge=1, le=65535)
    rack: str | None = None
    scheme: Literal["http", "https"] = "http"
    #: When the cluster first saw this id registered (that registration's ``started_at_ms``).
    first_registered_ms: int
    #: The last registration seen: its process ``incarnation`` and when that process started.
    incarnation: str = ""
    started_at_ms: int
    #: That registration's data folder id (``BrokerRegistration.log_dir_id``): a new one after
    #: a restart means the broker came back on an empty disk.
    log_dir_id: str = ""
    #: True while that registration is (as far as the record was told) in etcd; false once
    #: the controller saw it vanish (deregistered, or its lease expired).
    registered: bool = True
    #: The last moment a coordinator saw that registration in etcd: when the record was
    #: written while registered; once not, when the registration vanished as a coordinator
    #: watching etcd saw it (or, if none was watching then, the last moment one saw it).
    last_seen_ms: int


class BrokerDecommission(MetadataValue):
    """``decommissions/<id>``: the broker is being drained (``yak brokers decommission``).

    Not on a lease: the mark outlives the broker, so a dead broker can be drained too and a
    broker that restarts with the same id stays drained until recommissioned (the key is
    deleted). The controller moves leadership off it and reassigns its replicas onto the
    other brokers (``yak_coordinator.decisions.decommission``).
    """

    broker_id: int = Field(ge=0)
    requested_at_ms: int


class ControllerRecord(MetadataValue):
    """``controller``: the active coordinator, on its election lease."""

    coordinator_id: str
    host: str
    port: int = Field(ge=1, le=65535)
    #: Increases on every election; decisions carry it so a deposed controller is fenced.
    epoch: int = Field(ge=0)
    elected_at_ms: int
    #: ``https`` when the coordinator's listener speaks TLS (``YAK_TLS_CERT``).
    scheme: Literal["http", "https"] = "http"
    #: The internal listener (Kafka framing: produce, fetch, replication) on ``host``; None
    #: for a broker that has none (clients then use HTTP).
    data_port: int | None = Field(default=None, ge=1, le=65535)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


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

    ``isr_log_dirs`` records, for ISR members, the data folder id (``BrokerRegistration.
    log_dir_id``) whose log was in sync when the member joined (KIP-903's broker epoch in
    the ISR, with KIP-858's directory id as the epoch: it changes only when the log is
    lost). A member whose broker now registers another folder id lost that log: it is not
    in sync, not electable, and the controller takes it out of the ISR (docs/replication.md,
    "Empty-disk restarts"). A member without an entry (a state written by an older version)
    is trusted as before.
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
    #: ISR member → the data folder id its in-sync log lives in (see the class doc).
    isr_log_dirs: dict[int, str] = Field(default_factory=dict)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def log_dir_lost(self, broker_id: int, log_dir_id: str) -> bool:
        """Whether ``broker_id``, whose data folder is now ``log_dir_id``, is in the ISR with
        a log from another folder (lost with its disk). Unknown on either side ("", an older
        writer or broker): not lost, as before the field existed."""
        recorded = self.isr_log_dirs.get(broker_id, "")
        return bool(recorded and log_dir_id) and recorded != log_dir_id and broker_id in self.isr

    def log_dirs_of(self, isr: tuple[int, ...]) -> dict[int, str]:
        """The entries of ``isr_log_dirs`` that an ISR of ``isr`` keeps."""
        return {b: d for b, d in self.isr_log_dirs.items() if b in isr}

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (``replicas`` when none runs)."""
        if not self.removing_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment (``replicas`` when none runs)."""
        if not self.adding_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


class TopicPartitions(MetadataValue):
    """A set of partitions of one topic."""

    topic: str
    partitions: tuple[int, ...]


Assignment = tuple[TopicPartitions, ...]


class GroupMember(MetadataValue):
    """``groups/<g>/members/<member>``: a consumer instance, on its own lease.

    Written by the rest-proxy (any proxy: the instance lives here, not in a proxy's memory).
    The lease's TTL is the instance timeout (Confluent's ``consumer.instance.timeout.ms``);
    every request for the instance refreshes it, so an idle instance vanishes from etcd and the
    coordinator gives its partitions to the others. See ``docs/consumer-groups.md``.
    """

    member_id: str
    client_id: str = ""
    client_host: str = ""
    #: Topics subscribed by name (empty: no subscription).
    subscription: tuple[str, ...] = ()
    #: A regex subscription, matched in full against topic names (exclusive with ``subscription``).
    subscription_pattern: str | None = None
    #: Partitions the instance assigned itself (v2 ``assignments``): no group assignment then.
    manual_assignment: Assignment = ()
    #: Server-side assignor this member asks for: ``uniform`` (sticky) or ``range``.
    assignor: str = "uniform"
    session_timeout_ms: int = Field(default=300_000, ge=1)
    rebalance_timeout_ms: int = Field(default=60_000, ge=1)
    joined_at_ms: int
    #: The etcd lease the record is attached to (0 when none).
    lease_id: int = 0
    #: What the member holds now: the ``current_assignment`` it last acknowledged, and the member
    #: epoch of that assignment. A partition leaves ``owned`` once released (positions dropped,
    #: offsets auto-committed), and only then may the coordinator give it to another member.
    owned: Assignment = ()
    member_epoch: int = Field(default=0, ge=0)
    #: REST consumer instance settings (v2 create-consumer body), kept for every proxy.
    format: str = "binary"
    auto_offset_reset: str = "latest"
    auto_commit: bool = True
    fetch_min_bytes: int = -1
    request_timeout_ms: int = 1_000
    #: The principal that created the instance (security on; "" otherwise): the rest-proxy
    #: caps instances per principal (``YAK_MAX_CONSUMERS_PER_PRINCIPAL``).
    principal: str = ""

    @property
    def subscribed(self) -> bool:
        """Whether the member takes part in the group's assignment."""
        return bool(self.subscription) or self.subscription_pattern is not None


class GroupStateName(StrEnum):
    """A consumer group's state, as Kafka's tools show it."""

    #: No member (committed offsets may remain).
    EMPTY = "Empty"
    #: Membership or subscriptions changed; the target assignment is not computed yet.
    PREPARING_REBALANCE = "PreparingRebalance"
    #: A target assignment exists but some member does not own its target yet (partitions are
    #: being released by their old owners or adopted by their new ones).
    COMPLETING_REBALANCE = "CompletingRebalance"
    #: Every member owns exactly its target.
    STABLE = "Stable"
    #: The group was deleted.
    DEAD = "Dead"


class GroupState(MetadataValue):
    """``groups/<g>/state``: written by the active controller only.

    ``group_epoch`` increases whenever the member set, a subscription or a subscribed topic's
    partition count changes; ``assignment_epoch`` is the group epoch the ``target_assignment``
    was computed at. ``current_assignment`` is what each member may own now: its target minus
    the partitions another member still owns (cooperative moves: a partition changes owner only
    once its old owner released it or left). ``member_epochs[m]`` is set to the group epoch
    whenever ``current_assignment[m]`` changes; commits and positions are fenced by it.
    """

    group_id: str
    group_epoch: int = Field(default=0, ge=0)
    assignment_epoch: int = Field(default=0, ge=0)
    state: GroupStateName = GroupStateName.EMPTY
    assignor: str = "uniform"
    target_assignment: dict[str, Assignment] = Field(default_factory=dict)
    current_assignment: dict[str, Assignment] = Field(default_factory=dict)
    member_epochs: dict[str, int] = Field(default_factory=dict)
    #: When each member was first asked to release a partition (ms); a member that has not
    #: released it within its ``rebalance_timeout_ms`` is removed from the group (fenced).
    revoking_since_ms: dict[str, int] = Field(default_factory=dict)
    #: The subscribed topics' partition counts the target was computed from.
    topic_partitions: dict[str, int] = Field(default_factory=dict)
    #: The participants the target was computed from and each one's resolved topics (the
    #: existing topics its subscription names or its pattern matches), sorted.
    subscriptions: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class GroupPositions(MetadataValue):
    """``groups/<g>/positions/<member>``: a member's fetch positions ("topic/p" → next offset).

    On the member's lease, so it goes with the member.
    """

    member_id: str
    member_epoch: int = Field(ge=0)
    positions: dict[str, int] = Field(default_factory=dict)


class ClassicGroupMarker(MetadataValue):
    """``groups/<g>/classic``: the group is a Kafka classic group (JoinGroup/SyncGroup members
    held in the memory of its coordinating broker), on that broker's lease. Written when the
    group leaves Empty, deleted when it returns to Empty; its ``mod_revision`` guards the
    coordinator's offset commits, and its presence refuses REST members (one kind per group;
    docs/decisions.md, "Kafka classic groups")."""

    broker_id: int = Field(ge=0)
    protocol_type: str = ""
    #: The group's generation when the marker was written.
    generation: int = Field(default=0, ge=0)


class CommittedOffset(MetadataValue):
    """``offsets/<g>/<topic>/<p>``: a committed offset, fenced by the committing member epoch."""

    offset: int = Field(ge=0)
    metadata: str = ""
    leader_epoch: int = -1
    member_epoch: int = -1
    commit_time_ms: int


class ShareOffsetReset(StrEnum):
    """Where a share-partition starts when its group first reads it (Kafka's
    ``share.auto.offset.reset``)."""

    EARLIEST = "earliest"
    LATEST = "latest"


#: The delivery limit's bounds and default (Kafka's ``group.share.delivery.count.limit``).
SHARE_MAX_DELIVERY_ATTEMPTS = 5
#: The record lock's default (Kafka's ``group.share.record.lock.duration.ms``).
SHARE_LOCK_DURATION_MS = 30_000


class ShareGroupRecord(MetadataValue):
    """``share-groups/<g>``: a share group (queue semantics over topics, KIP-932) and its
    settings. Written by the admin API; read by the partitions' leaders, which keep each
    share-partition's state in the internal state topic, never here (docs/decisions.md)."""

    name: str
    created_at_ms: int
    #: Where a record goes once rejected or past the delivery limit; None: it is archived.
    dead_letter_topic: str | None = None
    max_delivery_attempts: int = Field(default=SHARE_MAX_DELIVERY_ATTEMPTS, ge=1, le=100)
    lock_duration_ms: int = Field(default=SHARE_LOCK_DURATION_MS, ge=1_000, le=3_600_000)
    offset_reset: ShareOffsetReset = ShareOffsetReset.LATEST
    #: Set when deletion starts; leaders drop the group's share-partitions, then the key goes.
    deleting: bool = False


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
