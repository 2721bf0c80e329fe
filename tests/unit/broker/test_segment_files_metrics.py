"""The broker's segment file cache (issue 19): its bound from the settings, its metrics (open
descriptors, the bound, evictions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.broker.broker_harness import BrokerHarness
from yak.record import RecordInput, encode_batch
from yak_broker.app import create_app
from yak_broker.metrics import SegmentFilesCollector
from yak_broker.settings import BrokerSettings
from yak_broker.storage.file_handles import FileHandleCache, default_max_open_files


def test_the_bound_is_a_setting(tmp_path: Path) -> None:
    settings = BrokerSettings.from_env({"YAK_MAX_OPEN_FILES": "7"}, data_dir=tmp_path)
    assert settings.max_open_files == 7
    assert create_app(settings).state.broker.logs.files.max_open == 7
    unset = BrokerSettings.from_env({}, data_dir=tmp_path)
    assert create_app(unset).state.broker.logs.files.max_open == default_max_open_files()
    with pytest.raises(ValueError, match="max open files"):
        BrokerSettings(max_open_files=0)


def test_the_collector_reads_the_cache_at_scrape_time(tmp_path: Path) -> None:
    files = FileHandleCache(2)
    registry = CollectorRegistry()
    registry.register(SegmentFilesCollector(files))
    assert registry.get_sample_value("yak_broker_open_segment_files") == 0
    handles = [files.open(tmp_path / str(i)) for i in range(5)]
    assert registry.get_sample_value("yak_broker_open_segment_files") == 2
    assert registry.get_sample_value("yak_broker_open_segment_files_max") == 2
    assert registry.get_sample_value("yak_broker_segment_file_evictions_total") == 3
    for handle in handles:
        handle.close()
    assert registry.get_sample_value("yak_broker_open_segment_files") == 0


async def test_a_broker_exports_its_file_cache(broker: BrokerHarness) -> None:
    broker.broker.logs.files.max_open = 2
    await broker.create_topic("files", partitions=3)
    batch = bytes(encode_batch([RecordInput(value=b"v")]))
    for partition in range(3):
        await broker.client.produce_one("files", partition, batch, acks=1)
    registry = broker.broker.metrics.registry
    open_files = registry.get_sample_value("yak_broker_open_segment_files")
    assert open_files is not None
    assert 1 <= open_files <= 2
    assert registry.get_sample_value("yak_broker_open_segment_files_max") == 2
    evictions = registry.get_sample_value("yak_broker_segment_file_evictions_total")
    assert evictions is not None
    assert evictions > 0  # the 3 partitions' active .log files do not fit in 2
