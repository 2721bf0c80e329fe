"""Option parsing of the ``yak`` data source: defaults, every form, and errors naming the option."""

from __future__ import annotations

import pytest

from yak.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OffsetSpec,
    OptionError,
    Subscribe,
    SubscribePattern,
    parse_read_options,
    parse_write_options,
)

URL = "http://127.0.0.1:9430"


def read(streaming: bool = False, **options: str):
    return parse_read_options({"url": URL, **options}, streaming=streaming)


def test_batch_defaults():
    opts = read(subscribe="a, b")
    assert opts.urls == (URL,)
    assert opts.subscription == Subscribe(("a", "b"))
    assert opts.starting == OffsetSpec("earliest")
    assert opts.ending == OffsetSpec("latest")
    assert opts.starting_timestamp is None
    assert opts.fail_on_data_loss is True
    assert (opts.max_records_per_partition, opts.min_partitions) == (None, None)
    assert opts.request_timeout_s == 30.0


def test_streaming_starts_at_latest_by_default():
    assert read(streaming=True, subscribe="a").starting == OffsetSpec("latest")


def test_keys_are_case_insensitive_as_spark_passes_them_lowercased():
    opts = read(subscribepattern="orders-.*", STARTINGOFFSETS="latest", failondataloss="FALSE")
    assert opts.subscription == SubscribePattern("orders-.*")
    assert opts.starting == OffsetSpec("latest")
    assert opts.fail_on_data_loss is False


def test_several_urls_and_trailing_slashes():
    opts = parse_read_options(
        {"url": "http://a:1/, https://b:2", "subscribe": "t"}, streaming=False
    )
    assert opts.urls == ("http://a:1", "https://b:2")


def test_assign_json():
    opts = read(assign='{"b": [1, 0, 1], "a": [2]}')
    assert opts.subscription == Assign((("a", (2,)), ("b", (0, 1))))


def test_offsets_json_with_earliest_and_latest_sentinels():
    spec = read(streaming=True, subscribe="t", startingOffsets='{"t": {"0": 23, "1": -2}}').starting
    assert spec.for_partition("t", 0) == 23
    assert spec.for_partition("t", 1) == EARLIEST
    assert spec.for_partition("t", 2) == LATEST  # unnamed: the default of a stream
    ending = read(subscribe="t", endingOffsets='{"t": {"0": 50, "1": -1}}').ending
    assert (ending.for_partition("t", 0), ending.for_partition("t", 1)) == (50, LATEST)


def test_split_limit_and_timestamp_options():
    opts = read(
        subscribe="t", maxRecordsPerPartition="100", minPartitions="4", startingTimestamp="0"
    )
    assert (opts.max_records_per_partition, opts.min_partitions) == (100, 4)
    assert opts.starting_timestamp == 0
    assert (
        read(streaming=True, subscribe="t", maxOffsetsPerTrigger="7").max_offsets_per_trigger == 7
    )


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({}, "subscribe"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "subscribe"),
        ({"subscribe": " , "}, "subscribe"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"assign": "[1]"}, "assign"),
        ({"assign": '{"a": []}'}, "assign"),
        ({"assign": '{"a": [-1]}'}, "assign"),
        ({"assign": "{nope"}, "assign"),
        ({"subscribe": "a", "startingOffsets": "oldest"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": 5}'}, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "endingOffsets"),
        ({"subscribe": "a", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition"),
        ({"subscribe": "a", "minPartitions": "many"}, "minPartitions"),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "5"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "startingTimestamp": "-5"}, "startingTimestamp"),
        (
            {"subscribe": "a", "startingTimestamp": "5", "startingOffsets": "earliest"},
            "startingTimestamp",
        ),
    ],
)
def test_bad_batch_options_name_the_option(options, option):
    with pytest.raises(OptionError, match=f"option '{option}'") as caught:
        read(**options)
    assert caught.value.option == option


def test_stream_refuses_ending_offsets():
    with pytest.raises(OptionError, match="endingOffsets"):
        read(streaming=True, subscribe="a", endingOffsets="latest")


@pytest.mark.parametrize("url", ["", " , ", "ftp://x", "localhost:9430"])
def test_bad_url(url):
    with pytest.raises(OptionError, match="option 'url'"):
        parse_read_options({"url": url, "subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match="option 'url'"):
        parse_write_options({"url": url})


def test_missing_url():
    with pytest.raises(OptionError, match="option 'url': required"):
        parse_read_options({"subscribe": "a"}, streaming=False)


def test_write_defaults_and_values():
    opts = parse_write_options({"url": URL})
    assert (opts.topic, opts.compression) == (None, "none")
    assert (opts.max_records_per_batch, opts.max_bytes_per_batch) == (1000, 1024 * 1024)
    opts = parse_write_options(
        {"url": URL, "topic": " out ", "compression": "ZSTD", "maxRecordsPerBatch": "10"}
    )
    assert (opts.topic, opts.compression, opts.max_records_per_batch) == ("out", "zstd", 10)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"topic": " "}, "topic"),
        ({"compression": "brotli"}, "compression"),
        ({"maxBytesPerBatch": "0"}, "maxBytesPerBatch"),
        ({"requestTimeoutMs": "soon"}, "requestTimeoutMs"),
    ],
)
def test_bad_write_options(options, option):
    with pytest.raises(OptionError, match=f"option '{option}'"):
        parse_write_options({"url": URL, **options})
