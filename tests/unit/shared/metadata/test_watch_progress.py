"""The etcd watch's liveness probe: a quiet stream is asked for progress, a silent one is left
for the next member, from the last revision delivered; answers to the probe are no events.

``StreamLiveness`` is pure; ``EtcdWatch`` runs here over scripted streams (one per member) in
place of gRPC, with the real ``MemberConnections``."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from yak.errors import MetadataStoreError
from yak.metadata.etcd_endpoints import EtcdEndpoint
from yak.metadata.etcd_members import MemberConnections
from yak.metadata.etcd_watch import (
    EtcdWatch,
    Liveness,
    StreamLiveness,
    WatchProbe,
    WatchReply,
)
from yak.metadata.store import EventKind, WatchEvent

WAIT_S = 5.0
#: Fast enough for a unit test, slow enough not to fire while the test itself is busy.
FAST = WatchProbe(interval_s=0.05, timeout_s=0.1)


# -- the pure rule ---------------------------------------------------------------------------


def test_a_quiet_stream_is_probed_then_declared_silent() -> None:
    liveness = StreamLiveness(WatchProbe(interval_s=2.0, timeout_s=3.0), now=100.0)
    assert liveness.due(101.9) is Liveness.WAIT
    assert liveness.next_check() == 102.0
    assert liveness.due(102.0) is Liveness.PROBE
    liveness.probed(102.0)
    assert liveness.next_check() == 105.0
    assert liveness.due(104.9) is Liveness.WAIT
    assert liveness.due(105.0) is Liveness.SILENT


@pytest.mark.parametrize("heard_at", [102.5, 104.9])
def test_anything_heard_after_a_probe_makes_the_stream_live_again(heard_at: float) -> None:
    liveness = StreamLiveness(WatchProbe(interval_s=2.0, timeout_s=3.0), now=100.0)
    liveness.probed(102.0)
    liveness.heard(heard_at)
    assert liveness.next_check() == heard_at + 2.0
    assert liveness.due(heard_at + 1.9) is Liveness.WAIT  # never SILENT: no probe pending
    assert liveness.due(heard_at + 2.0) is Liveness.PROBE


def test_a_busy_stream_is_never_probed() -> None:
    liveness = StreamLiveness(WatchProbe(interval_s=2.0, timeout_s=3.0), now=0.0)
    for now in (1.5, 3.0, 4.5, 6.0):
        assert liveness.due(now) is Liveness.WAIT
        liveness.heard(now)


def test_interval_zero_turns_the_probe_off() -> None:
    liveness = StreamLiveness(WatchProbe(interval_s=0, timeout_s=3.0), now=0.0)
    assert liveness.next_check() == math.inf
    assert liveness.due(1e9) is Liveness.WAIT


# -- the watch over scripted streams --------------------------------------------------------


def _put(key: str, revision: int) -> WatchEvent:
    return WatchEvent(EventKind.PUT, key.encode(), b"v", revision)


class Member:
    """One member's behaviour: what its next stream sends, and whether it answers probes."""

    def __init__(self, endpoint: EtcdEndpoint, revision: int) -> None:
        self.endpoint = endpoint
        self.revision = revision
        self.answers_probes = True
        self.backlog: list[WatchReply] = []
        self.streams: list[Stream] = []


class Conn:
    """A connection to a ``Member`` (what ``MemberConnections`` holds)."""

    def __init__(self, member: Member) -> None:
        self.member = member
        self.endpoint = member.endpoint
        self.ready = True

    async def authenticate(self, username: str, password: str, timeout_s: float) -> None:
        raise AssertionError("no user configured")

    async def close(self) -> None:
        for stream in self.member.streams:
            stream.cancel()


class Stream:
    """A scripted Watch stream: answers the create, then what the test puts in its queue."""

    def __init__(self, member: Member) -> None:
        self.member = member
        self.replies: asyncio.Queue[WatchReply | None] = asyncio.Queue()
        self.start_revision: int | None = None
        self.probes = 0
        self.cancelled = False

    async def create(self, prefix: bytes, start_revision: int) -> None:
        self.start_revision = start_revision
        self.replies.put_nowait(WatchReply(revision=self.member.revision, created=True))
        for reply in self.member.backlog:
            self.replies.put_nowait(reply)

    async def request_progress(self) -> None:
        self.probes += 1
        if self.member.answers_probes:
            answer = WatchReply(revision=self.member.revision, progress_answer=True)
            self.replies.put_nowait(answer)

    async def read(self) -> WatchReply | None:
        if self.cancelled:
            raise asyncio.CancelledError
        return await self.replies.get()

    def cancel(self) -> None:
        self.cancelled = True


class Cluster:
    def __init__(self, size: int) -> None:
        self.members = [Member(EtcdEndpoint("10.0.0.1", 2379 + i), revision=5) for i in range(size)]
        by_endpoint = {m.endpoint: m for m in self.members}
        self.connections: MemberConnections[Conn] = MemberConnections(
            [m.endpoint for m in self.members],
            lambda endpoint: Conn(by_endpoint[endpoint]),
            username=None,
            password=None,
            timeout_s=1.0,
        )
        self.watches: set[EtcdWatch] = set()

    def open_stream(self, conn: Conn) -> Stream:
        stream = Stream(conn.member)
        conn.member.streams.append(stream)
        return stream

    def watch(self, start_revision: int | None, probe: WatchProbe = FAST) -> EtcdWatch:
        return EtcdWatch(
            b"/w/",
            start_revision,
            members=self.connections,
            open_stream=self.open_stream,
            registry=self.watches,
            timeout_s=1.0,
            probe=probe,
        )


@pytest.fixture
def cluster() -> Cluster:
    return Cluster(3)


async def test_a_silent_stream_is_left_and_the_watch_resumes_on_the_next_member(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="yak.metadata.etcd_watch")
    first, second, _ = cluster.members
    async with cluster.watch(start_revision=5) as watch:
        (stream,) = first.streams
        stream.replies.put_nowait(WatchReply(revision=5, events=(_put("/w/a", 5),)))
        assert await asyncio.wait_for(anext(watch), WAIT_S) == _put("/w/a", 5)
        # The member goes silent: no error, no end, no answer to the probe (a partition).
        first.answers_probes = False
        second.revision = 7
        second.backlog = [WatchReply(revision=7, events=(_put("/w/b", 6), _put("/w/c", 7)))]
        assert [await asyncio.wait_for(anext(watch), WAIT_S) for _ in range(2)] == [
            _put("/w/b", 6),
            _put("/w/c", 7),
        ]
        assert stream.probes == 1
        assert stream.cancelled
        (resumed,) = second.streams
        assert resumed.start_revision == 6  # after the last revision delivered
        assert cluster.connections.endpoint == second.endpoint  # the store left it too
    assert "resumed at revision 6 on 10.0.0.1:2380" in caplog.text
    assert "answered nothing" in caplog.text


async def test_a_quiet_stream_that_answers_its_probes_is_kept(cluster: Cluster) -> None:
    first = cluster.members[0]
    async with cluster.watch(start_revision=5) as watch:
        (stream,) = first.streams
        await asyncio.sleep(FAST.interval_s * 10)
        assert stream.probes >= 3
        assert not stream.cancelled
        assert len(first.streams) == 1  # never left
        stream.replies.put_nowait(WatchReply(revision=6, events=(_put("/w/a", 6),)))
        # The probe's answers were no events: the first event is the first thing delivered.
        assert await asyncio.wait_for(anext(watch), WAIT_S) == _put("/w/a", 6)


async def test_answers_to_probes_do_not_move_the_resume_revision(cluster: Cluster) -> None:
    """etcd before 3.4.24 could answer a progress request ahead of events still queued for the
    watcher (etcd-io/etcd#15248): its revision is no promise, so a resume starts where the
    delivered events end."""
    first, second, _ = cluster.members
    first.revision = 50  # answers probes with a revision far ahead of what was delivered
    async with cluster.watch(start_revision=5) as watch:
        await asyncio.sleep(FAST.interval_s * 4)  # some probes answered at revision 50
        first.answers_probes = False
        second.backlog = [WatchReply(revision=6, events=(_put("/w/a", 6),))]
        assert await asyncio.wait_for(anext(watch), WAIT_S) == _put("/w/a", 6)
        assert second.streams[0].start_revision == 5


async def test_with_one_member_a_silent_stream_ends_the_watch_with_an_error() -> None:
    """Nowhere to move: the watch's consumer opens it again after its backoff
    (``WatchedPrefix``), on a connection gRPC makes again."""
    single = Cluster(1)
    single.members[0].answers_probes = False
    async with single.watch(start_revision=5) as watch:
        with pytest.raises(MetadataStoreError, match="watch failed"):
            await asyncio.wait_for(anext(watch), WAIT_S)
        assert single.members[0].streams[0].cancelled


async def test_an_unexpected_failure_ends_the_watch_instead_of_freezing_it(
    cluster: Cluster,
) -> None:
    async with cluster.watch(start_revision=5, probe=WatchProbe(interval_s=0)) as watch:
        (stream,) = cluster.members[0].streams

        async def broken_read() -> WatchReply | None:
            raise RuntimeError("a bug in the reader")

        stream.read = broken_read  # type: ignore[method-assign]  # before the reader runs
        with pytest.raises(MetadataStoreError, match="a bug in the reader"):
            await asyncio.wait_for(anext(watch), WAIT_S)
