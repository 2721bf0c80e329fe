"""What the runner asks of every system, and the payloads every driver sends.

A **payload** is a compact JSON document of exactly the workload's message size::

    {"t":"0000012345678901234","p":"xxxx…"}

``t`` is the producer's ``time.monotonic_ns()`` when the batch was handed to the client (19
digits, zero-padded so it sits at a fixed place), ``p`` pads to the size. Every driver sends
these same bytes (Yak's REST driver as a JSON value), and consumers return ``t`` so the runner
can compute end-to-end latency. All messages of one batch share one payload object: the client
process spends no time making bytes that differ in nothing but padding.

Drivers run in one asyncio process with the same shape: producers get whole batches and
publish them the system's fastest acknowledged way, consumers are polled in a loop.
"""

from __future__ import annotations

import itertools
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from loadtest.peers.workload import MIN_MESSAGE_SIZE, KeyDistributor, Workload

__all__ = [
    "Consumer",
    "Driver",
    "Message",
    "Producer",
    "keys",
    "make_payload",
    "payload_timestamp",
]

#: (key or None, payload) of one message.
Message = tuple[str | None, bytes]
_HEAD = b'{"t":"'
_MIDDLE = b'","p":"'
_TAIL = b'"}'
_DIGITS = 19
_T_START = len(_HEAD)
_T_END = _T_START + _DIGITS


def make_payload(size: int, sent_ns: int) -> bytes:
    """A payload of ``size`` bytes stamped ``sent_ns`` (see the module docstring)."""
    if size < MIN_MESSAGE_SIZE:
        raise ValueError(f"a payload needs at least {MIN_MESSAGE_SIZE} bytes, not {size}")
    stamp = b"%019d" % sent_ns
    pad = size - len(_HEAD) - _DIGITS - len(_MIDDLE) - len(_TAIL)
    return b"".join((_HEAD, stamp, _MIDDLE, b"x" * pad, _TAIL))


def payload_timestamp(payload: bytes | str) -> int:
    """The ``t`` of a payload (bytes, or its text)."""
    return int(payload[_T_START:_T_END])


def keys(distributor: KeyDistributor, seed: int = 0) -> Iterator[str | None]:
    """Message keys as the OpenMessaging Benchmark draws them: none, round-robin over 10,000
    keys, or random ones."""
    if distributor is KeyDistributor.NO_KEY:
        return itertools.repeat(None)
    if distributor is KeyDistributor.KEY_ROUND_ROBIN:
        return itertools.cycle(f"key-{i}" for i in range(10_000))
    rng = random.Random(seed)
    return (f"key-{rng.getrandbits(63)}" for _ in itertools.count())


class Producer(ABC):
    """Publishes batches to one topic."""

    @abstractmethod
    async def send(self, messages: Sequence[Message]) -> int:
        """Publish ``messages`` and wait until the system acknowledged each; the number that
        failed (raise only when the whole batch failed in a way worth reporting)."""

    @abstractmethod
    async def close(self) -> None:
        """Release what this producer holds."""


class Consumer(ABC):
    """One member of a subscription (consumer group) of one topic."""

    @abstractmethod
    async def receive(self) -> list[int]:
        """Wait (briefly) for messages, acknowledge or commit them, and answer their ``t``
        stamps (empty after the system's poll timeout)."""

    @abstractmethod
    async def close(self) -> None:
        """Leave the group and release what this consumer holds."""


class Driver(ABC):
    """One system under test: topics, producers and consumers."""

    #: Short name in reports (``yak-rest``, ``redis``, ...).
    name: str = ""
    #: One line for the report: API, acknowledgement and durability settings.
    description: str = ""

    def configure(self, workload: Workload) -> None:  # noqa: B027 - most drivers have no knob
        """Called by the runner before ``workload`` starts: a driver whose client a user would
        tune differently for throughput than for latency picks its settings here."""

    @abstractmethod
    async def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic``; on return producers and consumers may use it."""

    @abstractmethod
    async def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` and its data."""

    @abstractmethod
    async def create_producer(self, topic: str) -> Producer: ...

    @abstractmethod
    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        """A member of ``subscription`` that reads ``topic`` from its first message."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the driver holds."""
