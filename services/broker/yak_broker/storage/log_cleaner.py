"""Log compaction (``cleanup.policy=compact``): keep the latest record per key, offsets intact.

The ``Cleaner`` rewrites the closed segments of one partition (never the active one). Kafka's
algorithm (``LogCleaner``): build an ``OffsetMap`` key → last offset over the *dirty* section
``[first_dirty_offset, clean_end)``, then recopy every segment below ``clean_end`` keeping a
record only if

- it has a key (keyless records cannot be compacted and are dropped, as Kafka does),
- no later record with the same key exists (``offset >= map[key]``), and
- it is not a tombstone (null value) whose delete horizon has passed.

Offsets never change and order is kept; removed records leave gaps. Batches keep their base
offset, lastOffsetDelta, producer id/epoch and base sequence; a batch whose records all survive
is copied byte for byte. A batch left with no records disappears, except (a) the last batch of
each producer id (``producer_last_offsets``), kept as an empty header so sequence state
survives recovery, and (b) the last batch of each output segment, kept (empty if need be) so the
segment covers its whole offset range. Control batches are copied unchanged.

Tombstones (KIP-534): the first time a batch holding tombstones is rewritten, its baseTimestamp
becomes the *delete horizon* ``now_ms + delete_retention_ms`` and attributes bit 6 is set;
record timestamps are re-encoded relative to it, so they do not change. A later clean drops the
tombstones once ``now_ms >= horizon``. So tombstones live ``delete.retention.ms`` from the time
their segment first entered the clean portion of the log.

Segments are grouped (adjacent, total size ≤ ``max_segment_bytes``, offset span < 2**31) and
each group becomes one segment named after its first base offset. Files and crash safety:

1. write ``<base>.log.cleaned`` and fsync it;
2. rename it to ``<base>.log.swap`` and fsync the directory — the commit point;
3. ``complete_swap``: delete the group's old ``.log/.index/.timeindex/.txnindex`` files
   (highest base first), rename ``.swap`` → ``<base>.log``, fsync the directory.

``recover_interrupted_clean(dir)``, which the log loader calls before it opens segments, deletes
every ``*.cleaned`` file (an uncommitted clean: the old segments are intact) and finishes each
``*.log.swap``: it deletes the segment files whose base offset lies in
``[swap base, swap next offset)`` (the whole replaced group, thanks to rule (b)) and renames the
swap into place. Either way the log is the old one or the cleaned one, never a mix that
duplicates or loses an offset. The new segment has no index files; the segment loader rebuilds
missing indexes from the ``.log``.

Thread-safety: none. The caller must not append to, delete or truncate the segments being
cleaned meanwhile, and must hold its log lock around ``complete_swap`` and the reopening of the
replaced segments.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

import crc32c

from yak.errors import CorruptRecordError
from yak.record.batch import DecodedBatch, decode_batch, encode_batch
from yak.record.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    parse_header,
)
from yak.record.record import RecordInput
from yak_broker.storage.checkpoint import fsync_dir

__all__ = [
    "CLEANED_SUFFIX",
    "SEGMENT_FILE_SUFFIXES",
    "SWAP_SUFFIX",
    "CleanResult",
    "Cleaner",
    "CleanerConfig",
    "OffsetMap",
    "SwapPlan",
    "complete_swap",
    "read_segment_batches",
    "recover_interrupted_clean",
]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
#: The files of one segment; producer ``.snapshot`` files share the name prefix but are kept.
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_DELETE_HORIZON_BIT = 0x40
_MAX_RELATIVE_OFFSET = 2**31 - 1
_CRC = struct.Struct(">I")
_INT16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Topic settings the cleaner needs (``delete.retention.ms``, ``segment.bytes``)."""

    delete_retention_ms: int = 86_400_000
    max_segment_bytes: int = 1_073_741_824
    #: Soft cap on keys per pass; the map always takes at least one whole dirty segment.
    max_map_entries: int = 4_000_000


class OffsetMap:
    """Key → offset of its latest record in the dirty section (Kafka's ``SkimpyOffsetMap``,
    but exact: a dict of full keys rather than MD5 hashes)."""

    def __init__(self) -> None:
        self._map: dict[bytes, int] = {}

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 if the dirty section does not hold it."""
        return self._map.get(key, -1)

    def __len__(self) -> int:
        return len(self._map)


class SwapPlan(NamedTuple):
    """One committed group: ``<base_offset>.log.swap`` replaces the ``replaced_bases``."""

    base_offset: int
    replaced_bases: tuple[int, ...]


class CleanResult(NamedTuple):
    """What a pass did. ``first_dirty_offset`` is the new cleaner checkpoint."""

    first_dirty_offset: int
    swaps: tuple[SwapPlan, ...]
    records_read: int
    records_kept: int
    bytes_read: int
    bytes_written: int


def _segment_path(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def read_segment_batches(path: Path) -> Iterator[bytes]:
    """The raw bytes of each batch of a ``.log`` file (framing checked, not the CRC)."""
    with path.open("rb") as f:
        yield from _read_batches(f, path)


def _read_batches(f: BinaryIO, path: Path) -> Iterator[bytes]:
    while head := f.read(RECORD_BATCH_OVERHEAD):
        if len(head) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"{path}: torn batch header ({len(head)} bytes)")
        size = parse_header(head).size
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"{path}: batch declares size {size}")
        rest = f.read(size - RECORD_BATCH_OVERHEAD)
        if len(rest) != size - RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"{path}: torn batch of {size} bytes")
        yield head + rest


class Cleaner:
    """Compacts one partition's closed segments; see the module docstring for the rules."""

    def __init__(self, config: CleanerConfig = CleanerConfig()) -> None:
        self._config = config

    def clean(
        self,
        directory: Path | str,
        segment_bases: Sequence[int],
        end_offset: int,
        first_dirty_offset: int,
        producer_last_offsets: Mapping[int, int],
        now_ms: int,
        *,
        complete: bool = True,
    ) -> CleanResult:
        """Compact the segments ``segment_bases`` (ascending, closed, the last one ending at
        ``end_offset``, normally the active segment's base).

        ``first_dirty_offset`` is the previous result's checkpoint (the log start at first).
        ``producer_last_offsets`` maps producer id → last offset of its last batch
        (``ProducerStateManager.last_batch_offsets()``). With ``complete=False`` each group
        stops at the ``.swap`` commit and the caller runs ``complete_swap`` under its lock.
        """
        directory = Path(directory)
        if not segment_bases:
            return CleanResult(first_dirty_offset, (), 0, 0, 0, 0)
        bounds = [*segment_bases[1:], end_offset]
        segments = list(zip(segment_bases, bounds, strict=True))
        offset_map, clean_end = self._build_offset_map(directory, segments, first_dirty_offset)
        to_clean = [(base, upper) for base, upper in segments if upper <= clean_end]
        stats = [0, 0, 0, 0]  # records read, records kept, bytes read, bytes written
        swaps: list[SwapPlan] = []
        for group in self._group(directory, to_clean):
            plan = self._clean_group(
                directory, group, offset_map, producer_last_offsets, now_ms, stats
            )
            swaps.append(plan)
            if complete:
                complete_swap(directory, plan)
        return CleanResult(max(clean_end, first_dirty_offset), tuple(swaps), *stats)

    def _build_offset_map(
        self, directory: Path, segments: list[tuple[int, int]], first_dirty_offset: int
    ) -> tuple[OffsetMap, int]:
        offset_map = OffsetMap()
        clean_end = max((upper for _, upper in segments if upper <= first_dirty_offset), default=0)
        for base, upper in segments:
            if upper <= first_dirty_offset:
                continue
            if len(offset_map) >= self._config.max_map_entries:
                break
            for raw in read_segment_batches(_segment_path(directory, base)):
                batch = decode_batch(raw)
                if batch.header.is_control:
                    continue
                for record in batch.records:
                    if record.key is not None and record.offset >= first_dirty_offset:
                        offset_map.put(record.key, record.offset)
            clean_end = upper
        return offset_map, clean_end

    def _group(self, directory: Path, segments: list[tuple[int, int]]) -> list[list[int]]:
        groups: list[list[int]] = []
        size = 0
        for base, upper in segments:
            seg_size = _segment_path(directory, base).stat().st_size
            if (
                groups
                and size + seg_size <= self._config.max_segment_bytes
                and upper - groups[-1][0] <= _MAX_RELATIVE_OFFSET
            ):
                groups[-1].append(base)
                size += seg_size
            else:
                groups.append([base])
                size = seg_size
        return groups

    def _clean_group(
        self,
        directory: Path,
        group: list[int],
        offset_map: OffsetMap,
        producer_last_offsets: Mapping[int, int],
        now_ms: int,
        stats: list[int],
    ) -> SwapPlan:
        base = group[0]
        cleaned = _segment_path(directory, base, ".log" + CLEANED_SUFFIX)
        try:
            with cleaned.open("wb") as out:
                pending: tuple[bytes, DecodedBatch] | None = None
                for seg in group:
                    for raw in read_segment_batches(_segment_path(directory, seg)):
                        if pending is not None:
                            kept = self._filter(*pending, offset_map, producer_last_offsets, now_ms)
                            _write(out, kept, stats)
                        stats[2] += len(raw)
                        pending = (raw, decode_batch(raw))
                        stats[0] += len(pending[1].records)
                if pending is not None:  # rule (b): the group's last batch always stays
                    kept = self._filter(
                        *pending, offset_map, producer_last_offsets, now_ms, keep_header=True
                    )
                    _write(out, kept, stats)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            cleaned.unlink(missing_ok=True)
            raise
        os.replace(cleaned, _segment_path(directory, base, ".log" + SWAP_SUFFIX))
        fsync_dir(directory)
        return SwapPlan(base, tuple(group))

    def _filter(
        self,
        raw: bytes,
        batch: DecodedBatch,
        offset_map: OffsetMap,
        producer_last_offsets: Mapping[int, int],
        now_ms: int,
        *,
        keep_header: bool = False,
    ) -> bytes:
        """The bytes to write for ``batch``: ``raw``, a rebuilt batch, an empty header or b''."""
        header = batch.header
        if header.is_control:
            return raw
        retain_deletes = not header.has_delete_horizon or now_ms < header.base_timestamp
        kept = [
            r
            for r in batch.records
            if r.key is not None
            and r.offset >= offset_map.get(r.key)
            and (r.value is not None or retain_deletes)
        ]
        needs_horizon = not header.has_delete_horizon and any(r.value is None for r in kept)
        if len(kept) == len(batch.records) and not needs_horizon:
            return raw
        is_producer_last = (
            header.producer_id >= 0
            and producer_last_offsets.get(header.producer_id) == header.last_offset
        )
        if not kept and not (is_producer_last or keep_header):
            return b""
        has_horizon = bool(kept) and (needs_horizon or header.has_delete_horizon)
        if needs_horizon:
            base_timestamp = now_ms + self._config.delete_retention_ms
        elif kept:
            base_timestamp = header.base_timestamp
        else:  # an empty header: base and max timestamp both become the original max
            base_timestamp = header.max_timestamp
        encoded = encode_batch(
            [
                RecordInput(r.key, r.value, r.headers, r.timestamp, r.offset - header.base_offset)
                for r in kept
            ],
            base_offset=header.base_offset,
            base_timestamp=base_timestamp,
            compression=CompressionType(header.compression),
            timestamp_type=header.timestamp_type,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
            last_offset_delta=header.last_offset_delta,
            now_ms=now_ms,
        )
        return _set_delete_horizon_bit(encoded) if has_horizon else encoded


def _write(out: BinaryIO, data: bytes, stats: list[int]) -> None:
    if data:
        stats[1] += parse_header(data).record_count
        stats[3] += out.write(data)


def _set_delete_horizon_bit(data: bytes) -> bytes:
    """Set attributes bit 6 (KIP-534) and recompute the CRC, which covers the attributes."""
    buf = bytearray(data)
    (attributes,) = _INT16.unpack_from(buf, ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, ATTRIBUTES_OFFSET, attributes | _DELETE_HORIZON_BIT)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c.crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def complete_swap(directory: Path | str, plan: SwapPlan) -> None:
    """Step 3: delete the replaced segments' files and move ``<base>.log.swap`` into place."""
    _finish_swap(Path(directory), plan.base_offset, sorted(plan.replaced_bases, reverse=True))


def _finish_swap(directory: Path, base: int, doomed: list[int]) -> None:
    for old in doomed:  # highest first: a crash leaves a prefix of the group, still in range
        for suffix in SEGMENT_FILE_SUFFIXES:
            _segment_path(directory, old, suffix).unlink(missing_ok=True)
    os.replace(_segment_path(directory, base, ".log" + SWAP_SUFFIX), _segment_path(directory, base))
    fsync_dir(directory)


def _segment_bases(directory: Path) -> list[int]:
    bases = set()
    for path in directory.iterdir():
        stem, _, suffix = path.name.partition(".")
        if len(stem) == 20 and stem.isdigit() and "." + suffix in SEGMENT_FILE_SUFFIXES:
            bases.add(int(stem))
    return sorted(bases)


def recover_interrupted_clean(directory: Path | str) -> list[int]:
    """Undo or finish a clean that a crash interrupted; return the bases of finished swaps.

    Call before opening the partition's segments. Deletes ``*.cleaned`` files; for each
    ``<base>.log.swap`` deletes the segments with a base in ``[base, swap next offset)`` and
    renames the swap to ``<base>.log``. Other ``*.swap`` files (not written by this cleaner)
    are deleted.
    """
    directory = Path(directory)
    changed = False
    for path in sorted(directory.glob("*" + CLEANED_SUFFIX)):
        path.unlink()
        changed = True
    finished: list[int] = []
    for path in sorted(directory.glob("*" + SWAP_SUFFIX)):
        stem = path.name[:20]
        if not (path.name == f"{stem}.log{SWAP_SUFFIX}" and stem.isdigit()):
            path.unlink()
            changed = True
            continue
        base = int(stem)
        next_offset = base + 1
        for raw in read_segment_batches(path):
            next_offset = max(next_offset, parse_header(raw).next_offset)
        doomed = [b for b in _segment_bases(directory) if base <= b < next_offset]
        _finish_swap(directory, base, sorted(doomed, reverse=True))
        finished.append(base)
    if changed:
        fsync_dir(directory)
    return finished
