"""Fetch (api key 1, v4-v12) for consumers, through ``server.fetcher.serve_fetch``.

The same read as every other door: whole batches below the high watermark, the request's and
each partition's ``max_bytes`` (the first partition with data returns at least one batch), a
long poll of up to ``max_wait_ms`` (capped at the broker's ``max_wait_ms_limit``) until
``min_bytes`` are there, ``current_leader_epoch`` fencing, per-partition errors
(``NOT_LEADER_OR_FOLLOWER``, ``OFFSET_OUT_OF_RANGE`` with the log start offset and high
watermark...). ``isolation_level``: Yak has no transactions, so the last stable offset is the
high watermark and read_committed reads what read_uncommitted does. A partition of a topic
the principal may not READ (``kafka.authorize``, as the REST record reads) is answered with
``TOPIC_AUTHORIZATION_FAILED`` and no records; the others are served. The records returned
count against the principal's fetch quota (``kafka.quotas``: a throttled answer carries
``throttle_time_ms`` and is held that long).

**Fetch sessions** (KIP-227, v7+; ``kafka.consumer_fetch_sessions``): a full fetch
(``session_epoch`` 0) creates a session when the cache has room and is answered its id; an
incremental one names only changed partitions and ``forgotten_topics_data`` and is answered
only the partitions with news (records, a moved high watermark or log start offset, an error);
a refused one (unknown id 70, wrong epoch 71) is answered the error and no partition. A session
round long-polls on the session's one waiter and reads only the partitions it finds due (an
idle round reads no log). When the listener authenticates, READ is checked on every round
for every topic the session holds (as Kafka's ``foreachPartition`` over the session): a denied
partition stays in the session, is not read and is answered ``TOPIC_AUTHORIZATION_FAILED`` at
once, every round, until a grant lets it be read again. Only consumers fetch here: a request
with a replica id (a follower's) is refused — replication travels on the internal listener,
where followers authenticate.

v12 bodies are parsed and answered by the internal plane's hand-written codec (``kafka_wire``:
record bytes are written without a copy; errors carry its tagged field, which Kafka clients
skip); v4-v11 by kio. Single event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Any

from yak.errors import InvalidRequestError, TopicAuthorizationError, YakError
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import (
    CONSUMER_REPLICA_ID,
    Buffer,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    PartitionError,
    check_unique,
)
from yak.protocol.kafka_errors import kafka_error_code
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import authorized
from yak_broker.kafka.consumer_fetch_sessions import ConsumerFetchSession
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.quotas import QuotaKind
from yak_broker.kafka.schemas import read_request, write_response
from yak_broker.replication.delayed_fetch import is_satisfied
from yak_broker.replication.replica_manager import ReplicaManager
from yak_broker.server.fetcher import read_partitions, serve_fetch

__all__ = ["handle_fetch"]

API_FETCH = 1
_FETCH = QuotaKind.FETCH
_NONE: frozenset[str] = frozenset()


def _decode(version: int, body: memoryview) -> FetchRequest:
    if version == kw.FETCH_VERSION:
        return kw.decode_fetch_request(body)
    parsed = read_request(API_FETCH, version, body)
    partitions = tuple(
        FetchPartition(
            str(topic.topic),
            int(p.partition),
            int(p.fetch_offset),
            int(p.partition_max_bytes),
            int(getattr(p, "current_leader_epoch", -1)),
        )
        for topic in parsed.topics
        for p in topic.partitions
    )
    for p in partitions:
        if p.partition < 0 or p.offset < 0 or p.max_bytes < 1:
            raise InvalidRequestError(f"a malformed fetch of {p.topic}-{p.partition}")
    check_unique(list(partitions))
    forgotten = tuple(
        (str(topic.topic), int(partition))
        for topic in getattr(parsed, "forgotten_topics_data", ())
        for partition in topic.partitions
    )
    return FetchRequest(
        partitions,
        max_wait_ms=max(0, int(parsed.max_wait.total_seconds() * 1000)),
        min_bytes=max(0, int(parsed.min_bytes)),
        max_bytes=max(1, int(getattr(parsed, "max_bytes", 50 * 1024 * 1024))),
        replica_id=int(parsed.replica_id),
        session_id=int(getattr(parsed, "session_id", 0)),
        session_epoch=int(getattr(parsed, "session_epoch", -1)),
        forgotten=forgotten,
    )


async def handle_fetch(request: KafkaRequest) -> list[Buffer]:
    version, correlation_id = request.api_version, request.correlation_id
    fetch = _decode(version, request.body)
    if fetch.replica_id != CONSUMER_REPLICA_ID:
        raise InvalidRequestError("followers fetch on the internal listener")
    broker = request.server.broker
    try:
        session = request.server.fetch_sessions.open(
            fetch.session_id, fetch.session_epoch, len(fetch.partitions), broker.replicas.now_ms()
        )
    except YakError as exc:  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
        return _answer(version, correlation_id, (), exc.kafka_code)
    partitions: Sequence[FetchedPartition] = ()
    if session is not None:
        session.forget(fetch.forgotten)
        session.update(fetch.partitions)  # denied ones too: checked again every round
        refused = _refused(request, session.topics)
        partitions = await _session_round(request, fetch, session, refused)
        denied = [_denied(*key) for key in session.partitions if key[0] in refused]
    else:
        refused = _refused(request, (p.topic for p in fetch.partitions))
        allowed = tuple(p for p in fetch.partitions if p.topic not in refused)
        denied = [_denied(p.topic, p.partition) for p in fetch.partitions if p.topic in refused]
        if allowed:
            partitions = await serve_fetch(
                fetch._replace(partitions=allowed, session_id=0, session_epoch=-1),
                broker.replicas,
                max_wait_limit_ms=broker.settings.max_wait_ms_limit,
            )
    size = sum(len(memoryview(p.records)) for p in partitions)
    quotas = request.server.quotas
    throttle_ms = 0 if quotas is None else await quotas.throttle(_FETCH, request.principal, size)
    session_id = 0 if session is None else session.session_id
    return _answer(version, correlation_id, [*partitions, *denied], 0, throttle_ms, session_id)


def _refused(request: KafkaRequest, topics: Iterable[str]) -> frozenset[str]:
    """The topics the principal may not READ, among ``topics`` (a session's: every round)."""
    if request.server.security is None:  # the hot path without SASL: nothing to check
        return _NONE
    names = list(dict.fromkeys(topics))
    readable = authorized(request, Operation.READ, ResourceType.TOPIC, names)
    return frozenset(topic for topic in names if topic not in readable)


async def _session_round(
    request: KafkaRequest,
    fetch: FetchRequest,
    session: ConsumerFetchSession,
    refused: frozenset[str],
) -> Sequence[FetchedPartition]:
    """One fetch of a session: the long poll on its waiter over the partitions due (but those
    of ``refused`` topics, which answer a denial: at once); a full fetch answers every
    partition read, an incremental one those with news."""
    broker = request.server.broker
    replicas = broker.replicas
    stats = replicas.stats
    stats.fetch_requests.inc()
    loop = asyncio.get_running_loop()
    wait_ms = 0 if refused else min(fetch.max_wait_ms, broker.settings.max_wait_ms_limit)
    deadline = loop.time() + wait_ms / 1000
    full = fetch.session_epoch == 0
    waiter = request.server.fetch_sessions.waiter(session)
    read_s = wait_s = 0.0
    while True:
        waiter.arm()  # before the read: an append after it finds the armed future
        started = time.perf_counter()
        read = _read(session, fetch.max_bytes, replicas, refused)
        answers = read if full else _news(session, read)
        read_s += time.perf_counter() - started
        remaining = deadline - loop.time()
        if session.closed or remaining <= 0 or is_satisfied(answers, fetch.min_bytes):
            break
        parked = time.perf_counter()
        await waiter.wait(remaining)
        wait_s += time.perf_counter() - parked
    stats.fetch_stages.wait.observe(wait_s)
    stats.fetch_stages.read.observe(read_s)
    session.commit(read)
    for fetched in answers:
        stats.on_fetch(fetched.topic, fetched.records, follower=False)
    return answers


def _read(
    session: ConsumerFetchSession,
    max_bytes: int,
    replicas: ReplicaManager,
    refused: frozenset[str],
) -> list[FetchedPartition]:
    due = session.due(replicas.replicas)
    if refused:
        due = [cached for cached in due if cached.tp.topic not in refused]
    if not due:
        return []  # the idle round: no read, nothing built
    wanted = tuple(cached.wanted() for cached in due)
    return read_partitions(FetchRequest(wanted, max_bytes=max_bytes), replicas)


def _news(session: ConsumerFetchSession, read: list[FetchedPartition]) -> list[FetchedPartition]:
    partitions = session.partitions
    return [f for f in read if partitions[(f.topic, f.partition)].must_answer(f)]


def _denied(topic: str, partition: int) -> FetchedPartition:
    error = TopicAuthorizationError(
        f"not authorized to read topic {topic!r}",
        resource_type=ResourceType.TOPIC.value,
        resource_name=topic,
        operation=Operation.READ.value,
    )
    return FetchedPartition(topic, partition, error=PartitionError.of(error))


def _answer(
    version: int,
    correlation_id: int,
    partitions: Sequence[FetchedPartition],
    error_code: int,
    throttle_ms: int = 0,
    session_id: int = 0,
) -> list[Buffer]:
    if version == kw.FETCH_VERSION:
        return kw.encode_fetch_response(
            correlation_id,
            partitions,
            session_id=session_id,
            error_code=error_code,
            throttle_time_ms=throttle_ms,
        )
    grouped: dict[str, list[dict[str, Any]]] = {}
    for p in partitions:
        grouped.setdefault(p.topic, []).append(
            {
                "partition_index": p.partition,
                "error_code": kafka_error_code(p.error),
                "high_watermark": p.high_watermark,
                "last_stable_offset": p.last_stable_offset,
                "log_start_offset": p.log_start_offset,
                "aborted_transactions": [],
                "preferred_read_replica": -1,
                "records": bytes(p.records),
            }
        )
    values = {
        "throttle_time": throttle_ms,
        "error_code": error_code,
        "session_id": session_id,
        "responses": [{"topic": t, "partitions": parts} for t, parts in grouped.items()],
    }
    return write_response(API_FETCH, version, correlation_id, values)
