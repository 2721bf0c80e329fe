"""The files of ``yak groups offsets export`` and ``yak topics dump``: round trips and refusals;
the explicit offset reset body."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from yak.api.groups import CommitOffset, GroupDescription, OffsetResetRequest, PartitionLag
from yak.cli.group_offsets import offsets_document, parse_offsets
from yak.cli.topic_dump import DumpedRecord, Manifest, PartitionFile, parse_record_line, record_line


def _lag(topic: str, partition: int, committed: int | None) -> PartitionLag:
    return PartitionLag(
        topic=topic,
        partition=partition,
        committed_offset=committed,
        end_offset=10,
        lag=0,
        owner=None,
    )


def test_offsets_export_round_trips_and_leaves_out_uncommitted_partitions() -> None:
    group = GroupDescription(
        group_id="g",
        state="Empty",
        group_epoch=0,
        assignor="",
        members=[],
        partitions=[_lag("b", 0, 3), _lag("a", 1, 0), _lag("a", 0, None)],
        total_lag=0,
    )
    document = offsets_document(group, now_ms=5)
    assert document["offsets"] == [
        {"topic": "a", "partition": 1, "offset": 0},
        {"topic": "b", "partition": 0, "offset": 3},
    ]
    assert parse_offsets(document) == {("a", 1): 0, ("b", 0): 3}


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"offsets": []}, "version"),
        ({"version": 1}, "offsets"),
        ({"version": 1, "offsets": [{"topic": "t", "partition": 0, "offset": -1}]}, "offset"),
        ({"version": 1, "offsets": [{"topic": "t", "partition": "0", "offset": 1}]}, "partition"),
        (
            {"version": 1, "offsets": [{"topic": "t", "partition": 0, "offset": 1}] * 2},
            "twice",
        ),
    ],
)
def test_malformed_offsets_files_are_refused(document: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_offsets(document)


def test_explicit_reset_needs_offsets_and_only_then() -> None:
    offsets = [CommitOffset(topic="t", partition=0, offset=4)]
    assert OffsetResetRequest(to="explicit", offsets=offsets).offsets == offsets
    with pytest.raises(ValidationError):
        OffsetResetRequest(to="explicit")
    with pytest.raises(ValidationError):
        OffsetResetRequest(to="earliest", offsets=offsets)
    with pytest.raises(ValidationError):
        OffsetResetRequest(to="explicit", offsets=offsets * 2)


def test_a_dumped_record_keeps_every_byte_null_and_header() -> None:
    record = DumpedRecord(
        offset=7,
        timestamp=1_764_000_000_123,
        key=b"\x00k\xff",
        value=None,
        headers=(("trace", b"\x01"), ("trace", None), ("", b"")),
    )
    line = record_line(record)
    assert "\n" not in line
    assert parse_record_line(line) == record


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        '{"offset": "1", "timestamp": 0}',
        '{"offset": 1, "timestamp": 0, "key": "not base64!"}',
        '{"offset": 1, "timestamp": 0, "headers": [{"value": null}]}',
    ],
)
def test_malformed_record_lines_are_refused(line: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each line fails its own way
        parse_record_line(line)


def test_the_manifest_round_trips_and_must_list_every_partition() -> None:
    manifest = Manifest(
        topic="t",
        partitions=2,
        replication_factor=3,
        configs={"cleanup.policy": "compact"},
        dumped_at_ms=9,
        files=(PartitionFile(0, "partition-00000.jsonl", 0, 5, 5), PartitionFile(1, "p1", 2, 2, 0)),
    )
    assert Manifest.from_json(manifest.to_json()) == manifest
    document = manifest.to_json()
    document["partitions"] = 3
    with pytest.raises(ValueError, match="one file per partition"):
        Manifest.from_json(document)
    with pytest.raises(ValueError, match="manifest"):
        Manifest.from_json({"format": "other"})
