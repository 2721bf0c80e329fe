"""The blocking twins run their async objects on a loop thread of their own."""

from __future__ import annotations

import threading

import pytest

from tests.unit.shared.sdk.fake_proxy import FakeProxy
from yak.errors import InvalidConfigError, UnknownTopicOrPartitionError
from yak.sdk import Consumer, Producer, TopicPartition

URL = "http://proxy.test"


def _sdk_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("yak-")]


def test_producer_send_returns_a_concurrent_future() -> None:
    proxy = FakeProxy(partitions={"t": 3})
    with Producer(URL, transport=proxy.transport(), linger_ms=0) as producer:
        assert "yak-producer" in _sdk_threads()
        future = producer.send("t", b"x", key="k")
        metadata = future.result(timeout=5)
        assert metadata.topic == "t"
        assert producer.send_and_wait("t", "y", partition=2).partition == 2
        assert producer.partitions_for("t") == 3
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("nope", b"x")
        producer.flush()
    assert _sdk_threads() == []


def test_a_bad_config_raises_and_leaves_no_thread() -> None:
    with pytest.raises(InvalidConfigError):
        Producer(URL, acks="0")
    assert _sdk_threads() == []


def test_consumer_polls_and_iterates() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    proxy.to_poll.append(
        [{"topic": "t", "partition": 0, "offset": 0, "timestamp": 1, "value": "YQ==", "key": None}]
    )
    with Consumer(URL, "g", ["t"], transport=proxy.transport()) as consumer:
        assert consumer.member_id == "m-1"
        record = next(iter(consumer))
        assert record.value == b"a"
        assert consumer.assignment() == {TopicPartition("t", 0)}
        assert consumer.position(TopicPartition("t", 0)) == 1
        consumer.pause(TopicPartition("t", 0))
        assert consumer.paused() == {TopicPartition("t", 0)}
        consumer.resume(TopicPartition("t", 0))
        consumer.commit()
        consumer.seek("t", 0, 0)
        assert consumer.poll(0) == []
    assert proxy.commits == [{"offsets": [{"topic": "t", "partition": 0, "offset": 1}]}]
    assert _sdk_threads() == []
