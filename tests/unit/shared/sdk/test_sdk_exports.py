"""The SDK's public surface is exactly ``yak.sdk.__all__``."""

from __future__ import annotations

import yak.sdk


def test_public_names() -> None:
    assert yak.sdk.__all__ == [
        "AckFailure",
        "Acks",
        "Admin",
        "AsyncAdmin",
        "AsyncConsumer",
        "AsyncPartitionReader",
        "AsyncProducer",
        "AsyncShareConsumer",
        "Compression",
        "Consumer",
        "ConsumerRecord",
        "OffsetReset",
        "PartitionRead",
        "Producer",
        "RecordMetadata",
        "ResetTarget",
        "ShareConsumer",
        "ShareRecord",
        "TopicPartition",
    ]
    for name in yak.sdk.__all__:
        assert getattr(yak.sdk, name) is not None
