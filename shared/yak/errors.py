"""One typed error hierarchy for every Yak component.

Each error carries a stable ``code`` named as Kafka names it (``UNKNOWN_TOPIC_OR_PARTITION``,
``NOT_LEADER_OR_FOLLOWER`` ...), the numeric Kafka protocol error code where Kafka has one, and
whether a client may retry. Domain code raises these; each service maps them to HTTP status and
error body in one table at its boundary (see ``http_status``), never deep in the logic.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AuthenticationError",
    "AuthenticationThrottledError",
    "AuthorizationError",
    "BrokerHasReplicasError",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "BrokerStillRegisteredError",
    "ClusterAuthorizationError",
    "ConsumerGroupError",
    "ConsumerInstanceExistsError",
    "ConsumerQuotaExceededError",
    "CorruptRecordError",
    "CorruptShareStateError",
    "DelaysNotEnabledError",
    "DuplicateResourceError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FilterTooLargeError",
    "GroupAuthorizationError",
    "GroupIdNotFoundError",
    "GroupNotEmptyError",
    "IdempotencyKeyInUseError",
    "IdempotencyKeyReusedError",
    "IllegalGenerationError",
    "IllegalStateError",
    "InconsistentGroupProtocolError",
    "InvalidConfigError",
    "InvalidDelayError",
    "InvalidFilterError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidTopicError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "MessageTooLargeError",
    "MetadataStoreError",
    "NetworkError",
    "NotAcceptableError",
    "NotControllerError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PolicyViolationError",
    "RebalanceInProgressError",
    "RecordAlreadyDueError",
    "RequestBodyTimeoutError",
    "ResourceNotFoundError",
    "RevisionCompactedError",
    "ScheduledRecordNotFoundError",
    "ThrottlingQuotaExceededError",
    "TooManyRecordsError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
    "UnsupportedMediaTypeError",
    "YakError",
    "error_for_code",
    "error_for_kafka_code",
]


class YakError(Exception):
    """Base of every error Yak raises on purpose.

    ``code`` is the stable name used on the wire; ``kafka_code`` the Kafka protocol number
    (``-1`` where Kafka has none); ``retriable`` tells clients whether the same request may
    succeed later; ``http_status`` is the status the public APIs use by default.
    """

    code: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    kafka_code: ClassVar[int] = -1
    retriable: ClassVar[bool] = False
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready mapping: code, message and any details."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class UnknownServerError(YakError):
    """An unexpected failure on the server side."""

    code = "UNKNOWN_SERVER_ERROR"
    kafka_code = -1


class InvalidRequestError(YakError):
    """The request is malformed or inconsistent."""

    code = "INVALID_REQUEST"
    kafka_code = 42
    http_status = 400


class UnknownTopicOrPartitionError(YakError):
    """The topic or partition does not exist (or is not hosted here)."""

    code = "UNKNOWN_TOPIC_OR_PARTITION"
    kafka_code = 3
    retriable = True
    http_status = 404


class OffsetOutOfRangeError(YakError):
    """The requested offset is below the log start offset or above the log end offset."""

    code = "OFFSET_OUT_OF_RANGE"
    kafka_code = 1
    http_status = 416


class CorruptRecordError(YakError):
    """A record batch failed its framing or CRC-32C check."""

    code = "CORRUPT_MESSAGE"
    kafka_code = 2
    http_status = 400


class InvalidRecordError(YakError):
    """A record batch is well-formed but breaks a rule (bad magic, bad offsets, bad fields)."""

    code = "INVALID_RECORD"
    kafka_code = 87
    http_status = 400


class MessageTooLargeError(YakError):
    """A batch is larger than ``max.message.bytes``."""

    code = "MESSAGE_TOO_LARGE"
    kafka_code = 10
    http_status = 413


class UnsupportedCompressionTypeError(YakError):
    """The batch names a compression codec Yak does not know."""

    code = "UNSUPPORTED_COMPRESSION_TYPE"
    kafka_code = 76
    http_status = 400


class LeaderNotAvailableError(YakError):
    """The partition has no leader right now (an election is in progress)."""

    code = "LEADER_NOT_AVAILABLE"
    kafka_code = 5
    retriable = True
    http_status = 503


class NotLeaderOrFollowerError(YakError):
    """This broker does not lead the partition; ``details`` names the leader and its epoch."""

    code = "NOT_LEADER_OR_FOLLOWER"
    kafka_code = 6
    retriable = True
    http_status = 421


class KafkaTimeoutError(YakError):
    """The request did not complete in the allowed time."""

    code = "REQUEST_TIMED_OUT"
    kafka_code = 7
    retriable = True
    http_status = 504


class KafkaStorageError(YakError):
    """The broker's data folder failed under this partition: a write met ``ENOSPC`` or
    ``EIO``, or a read met ``EIO`` or a batch whose CRC no longer matches (bit rot).

    Kafka's ``KAFKA_STORAGE_ERROR`` (56, KIP-112): retriable, since the broker takes the folder
    offline and the controller moves the partition's leadership to an in-sync replica — the
    client refreshes its metadata and retries there. Nothing of the failed append stays in the
    log. HTTP 503: the server cannot serve this now and another attempt (after a metadata
    refresh) will be served, the same class as ``LEADER_NOT_AVAILABLE``; a 500 would say the
    request itself broke something, a 507 (Insufficient Storage) is WebDAV's and would tell a
    client nothing about retrying.
    """

    code = "KAFKA_STORAGE_ERROR"
    kafka_code = 56
    retriable = True
    http_status = 503


class NotEnoughReplicasError(YakError):
    """acks=all was asked while the ISR is smaller than ``min.insync.replicas``."""

    code = "NOT_ENOUGH_REPLICAS"
    kafka_code = 19
    retriable = True
    http_status = 503


class BrokerNotAvailableError(YakError):
    """The broker id is not registered and holds no replica."""

    code = "BROKER_NOT_AVAILABLE"
    kafka_code = 8
    http_status = 404


class BrokerIdNotRegisteredError(YakError):
    """The cluster has no registration and no record of this broker id (nothing to forget)."""

    code = "BROKER_ID_NOT_REGISTERED"
    kafka_code = 102
    http_status = 404


class BrokerStillRegisteredError(YakError):
    """The broker is registered (running): stop it before forgetting it."""

    code = "BROKER_STILL_REGISTERED"
    http_status = 409


class BrokerHasReplicasError(YakError):
    """Partitions still list the broker as a replica: move them off it (decommission or
    reassign) before forgetting it."""

    code = "BROKER_HAS_REPLICAS"
    http_status = 409


class NetworkError(YakError):
    """A server could not be reached (connection refused, reset, DNS ...)."""

    code = "NETWORK_EXCEPTION"
    kafka_code = 13
    retriable = True
    http_status = 503


class NotControllerError(YakError):
    """The request needs the active coordinator and this one is on standby."""

    code = "NOT_CONTROLLER"
    kafka_code = 41
    retriable = True
    http_status = 503


class FencedLeaderEpochError(YakError):
    """The request carries a leader epoch older than the current one."""

    code = "FENCED_LEADER_EPOCH"
    kafka_code = 74
    retriable = True
    http_status = 409


class UnknownLeaderEpochError(YakError):
    """The request carries a leader epoch newer than this broker knows (its metadata lags)."""

    code = "UNKNOWN_LEADER_EPOCH"
    kafka_code = 75
    retriable = True
    http_status = 409


class OutOfOrderSequenceError(YakError):
    """An idempotent producer's batch does not follow its last sequence number."""

    code = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    kafka_code = 45
    http_status = 409


class InvalidProducerEpochError(YakError):
    """The producer epoch is older than the one the partition knows: the producer is fenced."""

    code = "INVALID_PRODUCER_EPOCH"
    kafka_code = 47
    http_status = 409


class UnknownProducerIdError(YakError):
    """The broker has no state for this producer id."""

    code = "UNKNOWN_PRODUCER_ID"
    kafka_code = 59
    http_status = 409


class InvalidTopicError(YakError):
    """The topic name is not valid."""

    code = "INVALID_TOPIC_EXCEPTION"
    kafka_code = 17
    http_status = 400


class TopicAlreadyExistsError(YakError):
    """A topic with this name exists already."""

    code = "TOPIC_ALREADY_EXISTS"
    kafka_code = 36
    http_status = 409


class InvalidPartitionsError(YakError):
    """The partition count is not valid (zero, negative, or a decrease)."""

    code = "INVALID_PARTITIONS"
    kafka_code = 37
    http_status = 400


class InvalidReplicationFactorError(YakError):
    """The replication factor is not valid (below 1 or above the live broker count)."""

    code = "INVALID_REPLICATION_FACTOR"
    kafka_code = 38
    http_status = 400


class InvalidReplicaAssignmentError(YakError):
    """A replica assignment names unknown brokers, repeats one, or is empty."""

    code = "INVALID_REPLICA_ASSIGNMENT"
    kafka_code = 39
    http_status = 400


class InvalidConfigError(YakError):
    """A configuration key is unknown or its value is out of range."""

    code = "INVALID_CONFIG"
    kafka_code = 40
    http_status = 400


class PolicyViolationError(YakError):
    """The request breaks a cluster policy."""

    code = "POLICY_VIOLATION"
    kafka_code = 44
    http_status = 400


class ConsumerGroupError(YakError):
    """Base of consumer-group failures."""

    code = "GROUP_ERROR"
    http_status = 409


class InvalidGroupIdError(ConsumerGroupError):
    """The consumer group id is not valid."""

    code = "INVALID_GROUP_ID"
    kafka_code = 24
    http_status = 400


class GroupIdNotFoundError(ConsumerGroupError):
    """No consumer group with this id exists."""

    code = "GROUP_ID_NOT_FOUND"
    kafka_code = 69
    http_status = 404


class UnknownMemberIdError(ConsumerGroupError):
    """The member is not (or no longer) part of the group."""

    code = "UNKNOWN_MEMBER_ID"
    kafka_code = 25
    http_status = 404


class IllegalGenerationError(ConsumerGroupError):
    """The member's epoch (generation) is stale: it was fenced by a rebalance."""

    code = "ILLEGAL_GENERATION"
    kafka_code = 22


class RebalanceInProgressError(ConsumerGroupError):
    """The group is rebalancing; retry after the new assignment is known."""

    code = "REBALANCE_IN_PROGRESS"
    kafka_code = 27
    retriable = True


class FencedMemberEpochError(ConsumerGroupError):
    """The member no longer owns the partition it commits or seeks (KIP-848's fencing)."""

    code = "FENCED_MEMBER_EPOCH"
    kafka_code = 110


class GroupNotEmptyError(ConsumerGroupError):
    """The operation needs a group without active members (delete, offset reset)."""

    code = "NON_EMPTY_GROUP"
    kafka_code = 68


class InconsistentGroupProtocolError(ConsumerGroupError):
    """The group has members of the other kind: Kafka-protocol (classic) members while a REST
    member joins, or the reverse — one kind per group (docs/decisions.md, "Kafka classic
    groups"); it can change kind once no member of either kind is left."""

    code = "INCONSISTENT_GROUP_PROTOCOL"
    kafka_code = 23


class ConsumerInstanceExistsError(ConsumerGroupError):
    """A consumer instance with this name already exists in the group."""

    code = "CONSUMER_INSTANCE_EXISTS"


class IllegalStateError(ConsumerGroupError):
    """The consumer instance is not in a state that allows the request (e.g. a subscription
    and a manual assignment at once, or seeking a partition it does not own)."""

    code = "ILLEGAL_STATE"


class UnsupportedMediaTypeError(YakError):
    """The request's Content-Type is not one this endpoint accepts."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    http_status = 415


class NotAcceptableError(YakError):
    """No representation matches the request's Accept header (or the consumer's format)."""

    code = "NOT_ACCEPTABLE"
    http_status = 406


class MetadataStoreError(YakError):
    """The metadata store (etcd) failed or could not be reached."""

    code = "METADATA_STORE_ERROR"
    retriable = True
    http_status = 503


class RevisionCompactedError(MetadataStoreError):
    """A watch asked for a revision the store has compacted away; reload and watch again."""

    code = "REVISION_COMPACTED"
    retriable = False


class AuthenticationError(YakError):
    """The request carries no credential, or one that is unknown, revoked or wrong.

    Kafka answers a failed login with ``SASL_AUTHENTICATION_FAILED`` (58); over HTTP the name
    says what the client must do: authenticate.
    """

    code = "UNAUTHENTICATED"
    kafka_code = 58
    http_status = 401


class AuthorizationError(YakError):
    """The authenticated principal may not perform the operation (base of the three kinds)."""

    code = "AUTHORIZATION_FAILED"
    http_status = 403


class TopicAuthorizationError(AuthorizationError):
    """No ACL allows the principal this operation on the topic (or one denies it)."""

    code = "TOPIC_AUTHORIZATION_FAILED"
    kafka_code = 29


class GroupAuthorizationError(AuthorizationError):
    """No ACL allows the principal this operation on the consumer group."""

    code = "GROUP_AUTHORIZATION_FAILED"
    kafka_code = 30


class ClusterAuthorizationError(AuthorizationError):
    """No ACL allows the principal this operation on the cluster."""

    code = "CLUSTER_AUTHORIZATION_FAILED"
    kafka_code = 31


class ResourceNotFoundError(YakError):
    """The named resource (a user, an API key) does not exist."""

    code = "RESOURCE_NOT_FOUND"
    kafka_code = 91
    http_status = 404


class DuplicateResourceError(YakError):
    """A resource with this name exists already (a user)."""

    code = "DUPLICATE_RESOURCE"
    kafka_code = 92
    http_status = 409


class IdempotencyKeyReusedError(YakError):
    """An ``Idempotency-Key`` sent again with another request (another body, route or
    query) than the one it was first used for: refused, nothing written (as Stripe and the
    IETF ``Idempotency-Key`` draft answer)."""

    code = "IDEMPOTENCY_KEY_REUSED"
    http_status = 422


class IdempotencyKeyInUseError(YakError):
    """The first request with this ``Idempotency-Key`` is still being served (on this proxy or
    another): retry, and the first request's answer comes back."""

    code = "IDEMPOTENCY_KEY_IN_USE"
    retriable = True
    http_status = 409


class ThrottlingQuotaExceededError(YakError):
    """The principal's byte-rate quota is used up: retry after ``details["retry_after_s"]``.

    Kafka answers a client over its quota by delaying the response (``throttle_time_ms``) and
    names the error of a refused request over a quota ``THROTTLING_QUOTA_EXCEEDED`` (89); over
    HTTP the proxy answers 429 with ``Retry-After`` and the client waits.
    """

    code = "THROTTLING_QUOTA_EXCEEDED"
    kafka_code = 89
    retriable = True
    http_status = 429


class ConsumerQuotaExceededError(YakError):
    """The principal holds as many consumer instances as it may; delete one first."""

    code = "CONSUMER_QUOTA_EXCEEDED"
    http_status = 429


class TooManyRecordsError(YakError):
    """A produce request holds more records than the proxy accepts in one request."""

    code = "TOO_MANY_RECORDS"
    http_status = 413


class RequestBodyTimeoutError(YakError):
    """The client sent the request body too slowly (a stalled or trickling upload)."""

    code = "REQUEST_BODY_TIMEOUT"
    http_status = 408


class AuthenticationThrottledError(YakError):
    """Too many failed logins for this user, key or address: retry after
    ``details["retry_after_s"]`` (``yak.security.login_limiter``)."""

    code = "AUTHENTICATION_THROTTLED"
    http_status = 429


class InvalidRecordStateError(YakError):
    """An acknowledgement names records the member does not hold: not acquired by it, or its
    lock on them has expired (Kafka's ``INVALID_RECORD_STATE``). Nothing of that batch changed."""

    code = "INVALID_RECORD_STATE"
    kafka_code = 121
    http_status = 409


class CorruptShareStateError(YakError):
    """A share-partition state snapshot failed its checksum or its structure checks (truncated,
    unknown version, inconsistent runs); nothing was restored from it."""

    code = "CORRUPT_SHARE_STATE"


class InvalidFilterError(YakError):
    """A record filter expression (``yak.filters``) does not parse or names no known field.

    ``details`` say where: ``position`` (0-based character offset), ``line`` and ``column``
    (1-based), and ``expected`` (what would have been accepted there) when the parser knows it.
    """

    code = "INVALID_FILTER"
    http_status = 400


class FilterTooLargeError(InvalidFilterError):
    """A record filter is longer, has more nodes or nests deeper than ``yak.filters`` allows;
    ``details`` name the ``limit`` and its ``maximum`` (and where it was passed, if inside)."""

    code = "FILTER_TOO_LARGE"
    http_status = 400


class InvalidDelayError(YakError):
    """A delay or schedule cannot be honoured: ``deliver_after_ms`` and ``deliver_at`` both
    given, a negative delay, a time before 2000 or past the topic's ``delayed.delivery.max.ms``,
    or a ``yak-deliver-at`` header that is not ASCII decimal epoch milliseconds (``yak.delays``).
    """

    code = "INVALID_DELAY"
    http_status = 400


class DelaysNotEnabledError(YakError):
    """A record asks for a delay on a topic without ``delayed.delivery.enable=true``: refused,
    so that nobody believes a record is held back when it is not (``yak.delays``)."""

    code = "DELAYS_NOT_ENABLED"
    http_status = 400


class ScheduledRecordNotFoundError(YakError):
    """No pending schedule at that offset: the record is not delayed, its schedule was
    cancelled already, or the offset is outside the partition's readable records."""

    code = "SCHEDULED_RECORD_NOT_FOUND"
    http_status = 404


class RecordAlreadyDueError(YakError):
    """A cancel came for a delayed record whose due time has passed: share groups may hold
    it already, so it can no longer be cancelled."""

    code = "RECORD_ALREADY_DUE"
    http_status = 409


def _all_error_classes() -> dict[str, type[YakError]]:
    found: dict[str, type[YakError]] = {}
    stack: list[type[YakError]] = list(YakError.__subclasses__())
    while stack:
        cls = stack.pop()
        found.setdefault(cls.code, cls)
        stack.extend(cls.__subclasses__())
    return found


def error_for_code(code: str, message: str, **details: Any) -> YakError:
    """Rebuild the typed error from its wire ``code`` (clients use this on error bodies)."""
    cls = _all_error_classes().get(code, UnknownServerError)
    return cls(message, **details)


def error_for_kafka_code(kafka_code: int, message: str, **details: Any) -> YakError:
    """The typed error of a Kafka protocol error number (the class that declares it)."""
    for cls in _all_error_classes().values():
        if "kafka_code" in vars(cls) and cls.kafka_code == kafka_code:
            return cls(message, **details)
    return UnknownServerError(f"Kafka error {kafka_code}: {message}", **details)
