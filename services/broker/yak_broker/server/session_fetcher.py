"""A follower's fetch in an incremental fetch session (KIP-227), as the leader serves it.

``serve_session_fetch`` answers a Fetch that carries session fields (``session_epoch`` >= 0, or
a ``session_id``): ``FetchSessionCache.open`` finds or creates the follower's session and
records the positions the request names (a refused session answers the request-level error
code and no partition; a sessionless request — a consumer's, or ``session_epoch`` -1 — is
served by ``fetcher.serve_fetch`` as before). Then the long poll, on the session's one waiter
rather than one per partition:

1. arm the session's waiter, read the session's dirty partitions (``read_partitions`` over
   just those: a named position is reported to its ``LeaderPartition`` there, so the high
   watermark moves on the request's arrival, as without sessions);
2. answer if the reads hold ``min_bytes`` or a new error, or ``max_wait_ms`` passed, or the
   session was closed; otherwise wait for ``notify`` (an append, a leadership change) and
   read again;
3. commit: each answered partition remembers the high watermark, log start and error sent;
   one read to its end without error leaves the dirty set (data sent moves the follower's
   position, so its next request names it again), one cut short by the byte limit, or
   failed, or whose follower is outside the partition's ISR or may be leaving it (an ISR
   change in flight), stays: a caught-up follower outside the ISR must keep reporting its
   position, as the leader proposes adding it back only on a read with no other ISR change
   in flight.

A full fetch (``session_epoch`` 0) answers every partition read; an incremental one only those
with records or a changed high watermark, log start offset or error. An idle round reads
nothing, allocates nothing per partition and answers no partition after ``max_wait_ms``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from yak.protocol.broker_wire import FetchedPartition, FetchPartition, FetchRequest, FetchResponse
from yak.types import TopicPartition
from yak_broker.replication.delayed_fetch import is_satisfied
from yak_broker.replication.fetch_session_cache import FetchSessionError, LeaderFetchSession
from yak_broker.replication.replica_manager import ReplicaManager
from yak_broker.replication.state.fetch_metadata import INITIAL_EPOCH
from yak_broker.server.fetcher import read_partitions, serve_fetch

__all__ = ["serve_session_fetch"]


async def serve_session_fetch(
    request: FetchRequest, replicas: ReplicaManager, *, max_wait_limit_ms: int
) -> FetchResponse:
    """A fetch with session fields (see the module doc)."""
    now = replicas.now_ms()
    try:
        session = replicas.fetch_sessions.open(
            request.session_id,
            request.session_epoch,
            request.replica_id,
            request.partitions,
            request.forgotten,
            now,
        )
    except FetchSessionError as exc:
        replicas.stats.replica_fetch_requests.inc()
        return FetchResponse((), 0, exc.code)
    if session is None:
        return FetchResponse(
            tuple(await serve_fetch(request, replicas, max_wait_limit_ms=max_wait_limit_ms))
        )
    replicas.stats.replica_fetch_requests.inc()
    for topic, partition in request.forgotten:
        replicas.on_follower_forgotten(TopicPartition(topic, partition), request.replica_id)
    session.clock.last_fetch_ms = now
    partitions = await _long_poll(session, request, replicas, max_wait_limit_ms)
    for fetched in partitions:
        replicas.stats.on_fetch(fetched.topic, fetched.records, follower=True)
    return FetchResponse(partitions, session.session_id)


async def _long_poll(
    session: LeaderFetchSession,
    request: FetchRequest,
    replicas: ReplicaManager,
    max_wait_limit_ms: int,
) -> tuple[FetchedPartition, ...]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(request.max_wait_ms, max_wait_limit_ms) / 1000
    full = request.session_epoch == INITIAL_EPOCH
    stages = replicas.stats.replica_fetch_stages
    read_s = wait_s = 0.0
    waiter = session.waiter
    while True:
        waiter.arm()  # before the read: an append after it finds the armed future
        started = time.perf_counter()
        read = _read(session, request, replicas)
        answers = read if full else session.changes(read)
        read_s += time.perf_counter() - started
        remaining = deadline - loop.time()
        if session.closed or remaining <= 0 or is_satisfied(answers, request.min_bytes):
            break
        parked = time.perf_counter()
        await waiter.wait(remaining)
        wait_s += time.perf_counter() - parked
    stages.wait.observe(wait_s)
    stages.read.observe(read_s)
    if not session.closed:
        session.commit(read, _log_end_offset(replicas), _in_sync(replicas, request.replica_id))
    return tuple(answers)


def _read(
    session: LeaderFetchSession, request: FetchRequest, replicas: ReplicaManager
) -> list[FetchedPartition]:
    if not session.dirty:
        return []
    wanted = tuple(FetchPartition(*named) for named in session.wanted())
    return read_partitions(
        FetchRequest(
            wanted,
            max_bytes=request.max_bytes,
            replica_id=request.replica_id,
            replica_log_dir_id=request.replica_log_dir_id,
        ),
        replicas,
        session.clock,
    )


def _log_end_offset(replicas: ReplicaManager) -> Callable[[tuple[str, int]], int]:
    return lambda key: replicas.log_end_offset(TopicPartition(*key))


def _in_sync(replicas: ReplicaManager, replica_id: int) -> Callable[[tuple[str, int]], bool]:
    """Whether ``replica_id`` is settled in the ISR of a partition led here: a member, with
    no ISR change in flight (which may remove it). True when it is not led here: the read's
    error keeps it due anyway."""
    hosted = replicas.replicas

    def in_sync(key: tuple[str, int]) -> bool:
        replica = hosted.get(TopicPartition(*key))
        machine = replica.leader if replica is not None else None
        return machine is None or (replica_id in machine.isr and machine.pending is None)

    return in_sync
