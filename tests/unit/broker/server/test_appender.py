"""A produce that meets a full disk (``ENOSPC``): ``KAFKA_STORAGE_ERROR`` (retriable) on both
transports, nothing of it left in the log, the data folder taken offline — later appends are
refused before touching the disk, and the followers stop fetching — until it is back."""

from __future__ import annotations

import errno
import os

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import KafkaStorageError
from yak.protocol.broker_wire import FetchPartition, FetchRequest
from yak.record import RecordInput, encode_batch, iter_records


@pytest.fixture
def broker(broker_on_each_transport: BrokerHarness) -> BrokerHarness:
    return broker_on_each_transport


def batch(*values: bytes) -> bytes:
    return encode_batch([RecordInput(key=None, value=v, timestamp=1) for v in values])


async def test_a_full_disk_is_a_retriable_storage_error_and_takes_the_folder_offline(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.create_topic("full")
    await broker.client.produce_one("full", 0, batch(b"kept"))
    real_pwritev, writes = os.pwritev, []

    def no_space(fd: int, iov: list[bytes | memoryview], offset: int) -> int:
        writes.append(offset)
        real_pwritev(fd, iov[:1], offset)  # part of it reaches the file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", no_space)
    with pytest.raises(KafkaStorageError, match="No space left") as refused:
        await broker.client.produce_one("full", 0, batch(b"lost"))
    assert refused.value.retriable
    assert refused.value.kafka_code == 56
    failures = broker.broker.replicas.log_dir_failures
    assert failures.offline
    with pytest.raises(KafkaStorageError, match="data folder is offline"):
        await broker.client.produce_one("full", 0, batch(b"refused"))
    assert len(writes) == 1  # the second append never reached the disk
    monkeypatch.undo()

    failures.recover()  # what the monitor does once its probe succeeds
    appended = await broker.client.produce_one("full", 0, batch(b"after"))
    assert appended.base_offset == 1  # the failed append left no offset and no byte behind
    [fetched] = await broker.client.fetch(
        FetchRequest((FetchPartition("full", 0, 0, 1 << 20),), max_wait_ms=0)
    )
    assert [r.value for r in iter_records(fetched.records)] == [b"kept", b"after"]
