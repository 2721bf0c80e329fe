"""The proxy's per-broker sender against a scripted round handler: when rounds start, what
they hold, and how many are under way."""

from __future__ import annotations

import asyncio

from yak.errors import YakError
from yak_rest_proxy.produce.accumulator import PartitionQueue
from yak_rest_proxy.produce.sender import Sender


class Handler:
    """Records each round; a round ends when the test releases its gate."""

    def __init__(self, *, fail: bool = False) -> None:
        self.rounds: list[tuple[int, list[str]]] = []
        self.gates: list[asyncio.Event] = []
        self.aborted: list[tuple[list[str], YakError]] = []
        self.released: list[str] = []
        self.fail = fail

    async def send_round(
        self, broker_id: int, acks: int, queues: list[PartitionQueue], started: float
    ) -> None:
        self.rounds.append((acks, sorted(q.topic for q in queues)))
        gate = asyncio.Event()
        self.gates.append(gate)
        if self.fail:
            raise RuntimeError("a bug")
        await gate.wait()

    def abort_round(self, queues: list[PartitionQueue], error: YakError) -> None:
        self.aborted.append((sorted(q.topic for q in queues), error))

    def release_lingering(self, queue: PartitionQueue) -> None:
        self.released.append(queue.topic)


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_queues_ready_in_one_turn_share_a_round() -> None:
    handler = Handler()
    sender = Sender(handler, 1, max_in_flight=1)
    for topic in ("a", "b", "c"):
        sender.enqueue(PartitionQueue(topic, 0, 1))
    await turns(3)
    assert handler.rounds == [(1, ["a", "b", "c"])]
    await sender.aclose()


async def test_queues_ready_during_a_round_wait_for_its_answer_then_go_together() -> None:
    handler = Handler()
    sender = Sender(handler, 1, max_in_flight=1)
    sender.enqueue(PartitionQueue("a", 0, 1))
    await turns(1)
    sender.linger(PartitionQueue("l", 0, 1))
    sender.enqueue(PartitionQueue("b", 0, 1))
    sender.enqueue(PartitionQueue("c", 0, 1))
    await turns(3)
    assert handler.rounds == [(1, ["a"])]  # one round in flight at most
    handler.gates[0].set()
    await turns(3)
    assert handler.rounds == [(1, ["a"]), (1, ["b", "c"])]
    assert handler.released == ["l"]  # the answer let the lingering queue go
    await sender.aclose()


async def test_each_acks_gets_its_own_request() -> None:
    handler = Handler()
    sender = Sender(handler, 1, max_in_flight=1)
    sender.enqueue(PartitionQueue("a", 0, 1))
    sender.enqueue(PartitionQueue("b", 0, -1))
    await turns(3)
    assert handler.rounds == [(1, ["a"])]
    handler.gates[0].set()
    await turns(3)
    assert handler.rounds == [(1, ["a"]), (-1, ["b"])]
    await sender.aclose()

    handler = Handler()
    sender = Sender(handler, 1, max_in_flight=2)
    sender.enqueue(PartitionQueue("a", 0, 1))
    sender.enqueue(PartitionQueue("b", 0, -1))
    await turns(3)
    assert handler.rounds == [(1, ["a"]), (-1, ["b"])]  # two slots: both under way
    assert sender.outstanding == 2
    await sender.aclose()


async def test_a_round_that_fails_aborts_its_queues_and_the_sender_goes_on() -> None:
    handler = Handler(fail=True)
    sender = Sender(handler, 1, max_in_flight=1)
    sender.enqueue(PartitionQueue("a", 0, 1))
    await turns(2)
    assert [topics for topics, _ in handler.aborted] == [["a"]]
    assert sender.outstanding == 0
    sender.enqueue(PartitionQueue("b", 0, 1))
    await turns(2)
    assert handler.rounds == [(1, ["a"]), (1, ["b"])]
    await sender.aclose()


async def test_closing_cancels_the_rounds_and_starts_none() -> None:
    handler = Handler()
    sender = Sender(handler, 1, max_in_flight=1)
    sender.enqueue(PartitionQueue("a", 0, 1))
    await turns(2)  # the round of "a" under way
    sender.enqueue(PartitionQueue("b", 0, 1))  # waits for the round in flight
    await sender.aclose()
    await turns(3)
    assert handler.rounds == [(1, ["a"])]  # the cancelled round's end started no other
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
