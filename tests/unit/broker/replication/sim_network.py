"""The simulation's network: an in-memory bag of messages that the schedule delivers one by one.

Two kinds of traffic, as in a Yak cluster:

- **broker to broker** (a follower's fetch round and the leader's answer): lost when the link
  between the two brokers is cut, at sending or while in flight; ``drop`` loses one at random,
  ``duplicate`` delivers one twice.
- **etcd** (metadata from the controller, ISR proposals and their results): never lost, only
  delayed; a broker cut off from etcd (a "zombie") is handled by the cluster, not here.

Delivery order is chosen by the schedule's random generator (``take``), so messages reorder; a
message for a broker that has crashed and restarted since (another incarnation) is never
delivered. A broker's own wake-ups (``Wake``: a parked session fetch to read again) go through
the same bag, so they interleave with everything else, and are never lost. No clock and no
threads: everything happens when the schedule calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from yak.metadata.models import PartitionState
from yak_broker.replication.state.fetch_session import FetchRound
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import AlterIsr, EpochAnswer, FetchAnswer

if TYPE_CHECKING:
    from tests.unit.broker.replication.sim_fetch import Fetcher, Parked

__all__ = [
    "CONTROLLER",
    "Envelope",
    "Fetch",
    "FetchReply",
    "Metadata",
    "Network",
    "Propose",
    "ProposeResult",
    "Wake",
]

#: The address of the controller and etcd (one party for the simulation).
CONTROLLER = -1


@dataclass(frozen=True, slots=True)
class Fetch:
    """A follower's round to a leader: epoch queries and fetch positions together, with the
    request's byte limits and what the follower's session believes the leader's holds."""

    fetcher: Fetcher
    round: FetchRound
    max_bytes: int = 1 << 20
    partition_max_bytes: int = 1 << 20
    #: Per partition the position (fetch offset, leader epoch) the follower's fetch session
    #: holds at the leader after this round (sessionless: the positions named).
    covered: dict[tuple[str, int], tuple[int, int]] | None = None


@dataclass(frozen=True, slots=True)
class FetchReply:
    fetch: Fetch
    epoch_answers: tuple[EpochAnswer, ...]
    fetch_answers: tuple[FetchAnswer, ...]
    #: The fetch response's session id and request-level error code (KIP-227).
    session_id: int = 0
    error_code: int = 0

    @property
    def round(self) -> FetchRound:
        return self.fetch.round


@dataclass(frozen=True, slots=True)
class Wake:
    """A leader's parked session fetch was woken (``FetchWaiter.wake``): read it again."""

    parked: Parked


@dataclass(frozen=True, slots=True)
class Metadata:
    """The controller committed this state; the broker's watch delivers it."""

    state: PartitionState


@dataclass(frozen=True, slots=True)
class Propose:
    """A leader's AlterIsr, written with a compare-and-swap (the broker's ``isr_writer``)."""

    proposal: AlterIsr
    machine: LeaderPartition


@dataclass(frozen=True, slots=True)
class ProposeResult:
    proposal: AlterIsr
    machine: LeaderPartition
    committed: PartitionState | None


Body = Fetch | FetchReply | Metadata | Propose | ProposeResult | Wake


@dataclass(frozen=True, slots=True)
class Envelope:
    src: int
    #: The sender's incarnation (replies go to it; -1: the controller).
    src_incarnation: int
    dst: int
    #: The incarnation of ``dst`` this is for (-1: the controller, which never restarts).
    dst_incarnation: int
    body: Body

    @property
    def broker_to_broker(self) -> bool:
        return isinstance(self.body, Fetch | FetchReply)


class Network:
    def __init__(self) -> None:
        self.queue: list[Envelope] = []
        self.cut: set[frozenset[int]] = set()

    def connected(self, a: int, b: int) -> bool:
        return a == b or frozenset((a, b)) not in self.cut

    def _lost(self, envelope: Envelope) -> bool:
        return envelope.broker_to_broker and not self.connected(envelope.src, envelope.dst)

    def send(self, envelope: Envelope) -> None:
        if not self._lost(envelope):
            self.queue.append(envelope)

    def take(self, rng: random.Random | None = None, slow: int | None = None) -> Envelope | None:
        """Remove a message (a random one, else the oldest); None if it was lost in a cut.

        Messages to the ``slow`` broker are picked a tenth as often as the others."""
        if not self.queue:
            return None
        if rng is None:
            index = 0
        elif slow is None:
            index = rng.randrange(len(self.queue))
        else:
            weights = [0.1 if e.dst == slow else 1.0 for e in self.queue]
            index = rng.choices(range(len(self.queue)), weights)[0]
        envelope = self.queue.pop(index)
        return None if self._lost(envelope) else envelope

    def drop(self, rng: random.Random) -> Envelope | None:
        """Lose one broker-to-broker message."""
        droppable = [i for i, e in enumerate(self.queue) if e.broker_to_broker]
        return self.queue.pop(rng.choice(droppable)) if droppable else None

    def duplicate(self, rng: random.Random) -> Envelope | None:
        """Deliver one broker-to-broker message twice (e.g. a retried request)."""
        candidates = [e for e in self.queue if e.broker_to_broker]
        if not candidates:
            return None
        envelope = rng.choice(candidates)
        self.queue.append(envelope)
        return envelope

    def cut_link(self, a: int, b: int) -> None:
        if a != b:
            self.cut.add(frozenset((a, b)))

    def isolate(self, broker: int, brokers: tuple[int, ...]) -> None:
        for other in brokers:
            self.cut_link(broker, other)

    def heal(self) -> None:
        self.cut.clear()
