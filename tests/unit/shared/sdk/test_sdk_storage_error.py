"""A broker's failed disk as the SDK meets it through the proxy: ``KAFKA_STORAGE_ERROR``
(503, retriable) is retried with the same batch until the new leader takes it — delivered
once — where it used to be ``UNKNOWN_SERVER_ERROR`` (500, not retriable), which failed it."""

from __future__ import annotations

from tests.unit.shared.sdk.fake_proxy import FakeProxy
from yak.errors import KafkaStorageError
from yak.sdk import AsyncProducer

URL = "http://proxy.test"


async def test_a_storage_error_is_retried_and_the_record_delivered_once() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    for _ in range(2):
        proxy.fail("batches", "before", KafkaStorageError("storage error on t-0: No space"))
    async with AsyncProducer(
        URL, transport=proxy.transport(), retry_backoff_ms=1, linger_ms=0
    ) as producer:
        written = await producer.send_and_wait("t", "v")
    assert written.offset == 0
    assert proxy.values("t", 0) == [b"v"]
    assert len(proxy.batches) == 3  # two refused, the third taken
