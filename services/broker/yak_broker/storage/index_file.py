"""The common part of the sparse segment indexes (Kafka's ``AbstractIndex``).

An index file is a flat array of fixed-size big-endian entries ``(key, value)``, sorted by key,
with no header and no checksum: "in the event of a crash it is rebuilt" from the ``.log``
(``OffsetIndex.java``). ``OffsetIndex`` and ``TimeIndex`` define what key and value mean.

Memory and file: an index holds in memory only its newest entries (the *tail*, fewer than
``2 * BLOCK_ENTRIES``) and, for the entries before them, a *summary*: the key and value of the
first entry of every block of ``BLOCK_ENTRIES`` entries, which are only in the file. So an
index costs memory in proportion to its size over ``BLOCK_ENTRIES`` (16 bytes per 128 entries,
about 128 bytes per MiB of log at the default 4 KiB interval) instead of holding every entry:
before, a broker's memory grew with the data it held on disk (1 % of it), 6 to 10 MB an hour in
the two-hour soak. A lookup in the tail — a consumer at the end of the log, the appender —
costs a ``bisect`` as before; one below the tail bisects the summary and reads one block from
the file (one ``pread`` of 1 to 1.5 KiB, in the page cache), kept in a small cache of decoded
blocks shared by every index of the process (``BLOCKS``) so a consumer reading an old segment
pays the read once per block.

New entries are buffered and written to the file by ``flush`` (on roll, on close, before the log
fsyncs the index, and when the tail spills a block), so appends rarely cost a system call, and
the file's descriptor is needed only to load, flush, read a block, truncate and sync: it is a
``FileHandle`` of the broker's bounded ``FileHandleCache`` and is usually evicted (no memory map
holds the file). Unlike Kafka the file is not preallocated to ``segment.index.bytes``: it holds
exactly the flushed entries, and "full" is a count (``segment.index.bytes`` over the entry
size). The segment rolls when an index is full; an entry that would overflow a full index is
skipped (the index is sparse), so an append never fails after its data was written.

Crash behaviour: the file may lack the last unflushed entries or end in a torn entry; entries
spilled from the active segment's tail may be written before the log data they point at is
synced (no fsync is added). A load of a file whose size is not a whole number of entries, with
keys out of order, or with values out of order (``VALUES_STRICT``) raises ``CorruptIndexError``;
the loader then rebuilds the index from the log. Only the active segment's index may be unsynced
below the recovery point, and recovery after an unclean stop always rebuilds the active
segment's indexes.

Thread-safety: none; the owning segment is used by one writer (the partition log), and
``BLOCKS`` by the broker's event loop (and the loading thread before it serves).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import struct
import sys
from array import array
from collections import OrderedDict
from pathlib import Path

from yak.errors import KafkaStorageError
from yak_broker.storage.file_handles import FileHandleCache

__all__ = ["BLOCKS", "BLOCK_ENTRIES", "BlockCache", "CorruptIndexError", "IndexFile"]

#: Entries per block: the summary holds one entry per block, the tail 1 or 2 blocks' worth.
BLOCK_ENTRIES = 128

#: Bytes read at a time while loading a file (a whole number of blocks of either entry size).
_LOAD_CHUNK_BLOCKS = 512

_Block = tuple["array[int]", "array[int]"]


class CorruptIndexError(KafkaStorageError):
    """An index file failed its sanity check; it must be rebuilt from the log (a
    ``KAFKA_STORAGE_ERROR``: a client rebuilds it as ``KafkaStorageError``)."""


class BlockCache:
    """Decoded blocks of index files, least recently used evicted first. An index names its
    blocks with a key it renews whenever its file's entries change below the tail (a
    truncation), so a stale block is never found; it ages out."""

    def __init__(self, max_blocks: int = 1024) -> None:
        self.max_blocks = max_blocks
        self._lru: OrderedDict[tuple[int, int], _Block] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._lru)

    def get(self, key: tuple[int, int]) -> _Block | None:
        block = self._lru.get(key)
        if block is None:
            self.misses += 1
            return None
        self.hits += 1
        self._lru.move_to_end(key)
        return block

    def put(self, key: tuple[int, int], block: _Block) -> None:
        self._lru[key] = block
        self._lru.move_to_end(key)
        while len(self._lru) > self.max_blocks:
            self._lru.popitem(last=False)


#: The process's one cache of decoded blocks (about 1 KiB each: 1 MiB at most).
BLOCKS = BlockCache()

_generations = itertools.count(1)


@functools.cache
def block_struct(entry_format: str) -> struct.Struct:
    """The big-endian ``struct`` of one block of ``BLOCK_ENTRIES`` entries of ``entry_format``,
    one per format for the process: a compiled format of 128 entries holds ~8.6 KB, and one
    per index (two a segment) made a broker of 20,000 replicas ~350 MB larger."""
    return struct.Struct(">" + entry_format.lstrip("<>!=@") * BLOCK_ENTRIES)


class IndexFile:
    """Sorted fixed-size ``(key, value)`` entries: a tail and a summary in memory, all of them
    in the file."""

    #: Values must strictly increase (True), may repeat (False); checked on load and append.
    VALUES_STRICT = True

    def __init__(
        self,
        path: Path,
        entry: struct.Struct,
        key_type: str,
        max_index_bytes: int,
        files: FileHandleCache | None = None,
        *,
        new: bool = False,
    ) -> None:
        self._path = path
        self._entry = entry
        self._key_type = key_type
        self._block_format = block_struct(entry.format)
        #: Entries [0, _spilled) live in the file only; [_spilled, entries) in the tail too.
        self._spilled = 0
        self._keys: array[int] = array(key_type)
        self._values: array[int] = array("i")
        #: The first key and value of each spilled block.
        self._summary_keys: array[int] = array(key_type)
        self._summary_values: array[int] = array("i")
        self._max_entries = max(max_index_bytes // entry.size, 1)
        self._flushed = 0
        self._generation = next(_generations)
        cache = files if files is not None else FileHandleCache()
        if new:  # an empty file just created (``log_creation``): nothing to load or open yet
            self._file = cache.handle(path)
            return
        self._file = cache.open(path)
        try:
            self._load()
        except BaseException:
            self._file.close()
            raise

    def _load(self) -> None:
        fd = self._file.fd()
        size = os.fstat(fd).st_size
        width = self._entry.size
        if size % width:
            raise CorruptIndexError(
                f"index {self._path.name} has {size} bytes, "
                f"not a multiple of the {width}-byte entry"
            )
        count = size // width
        keep_from = max(count // BLOCK_ENTRIES - 1, 0) * BLOCK_ENTRIES  # tail: 1 or 2 blocks
        chunk = _LOAD_CHUNK_BLOCKS * BLOCK_ENTRIES * width
        n = 0
        last_key = last_value = None
        strict = self.VALUES_STRICT
        for start in range(0, size, chunk):
            data = os.pread(fd, min(chunk, size - start), start)
            for key, value in self._entry.iter_unpack(data):
                if last_key is not None and key <= last_key:
                    raise CorruptIndexError(f"index {self._path.name}: keys not increasing at {n}")
                if last_value is not None and (
                    value < last_value or (strict and value == last_value)
                ):
                    order = "increasing" if strict else "decreasing"
                    raise CorruptIndexError(f"index {self._path.name}: values not {order} at {n}")
                if n >= keep_from:
                    self._keys.append(key)
                    self._values.append(value)
                elif n % BLOCK_ENTRIES == 0:
                    self._summary_keys.append(key)
                    self._summary_values.append(value)
                last_key, last_value = key, value
                n += 1
        self._spilled = keep_from
        self._flushed = count

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> int:
        return self._spilled + len(self._keys)

    @property
    def resident_entries(self) -> int:
        """Entries held in memory (the tail and the summary), for tests and metrics."""
        return len(self._keys) + len(self._summary_keys)

    @property
    def is_open(self) -> bool:
        """Whether the file holds a descriptor now (see ``file_handles``)."""
        return self._file.is_open

    def is_full(self) -> bool:
        return self.entries >= self._max_entries

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th ``(key, value)`` (negative counts from the end)."""
        if n < 0:
            n += self.entries
        if not 0 <= n < self.entries:
            raise IndexError(f"index {self._path.name}: no entry {n} of {self.entries}")
        if n >= self._spilled:
            return self._keys[n - self._spilled], self._values[n - self._spilled]
        keys, values = self._block(n // BLOCK_ENTRIES)
        return keys[n % BLOCK_ENTRIES], values[n % BLOCK_ENTRIES]

    def last_entry(self) -> tuple[int, int] | None:
        """The last ``(key, value)``, or None when empty."""
        if self._keys:
            return self._keys[-1], self._values[-1]
        return self.entry(-1) if self._spilled else None

    def _append(self, key: int, value: int) -> None:
        """Add an entry; a full index silently skips it (the index is sparse, and the segment
        rolls before its next append), so an append never fails after its data is written."""
        if self.entries < self._max_entries:
            self._keys.append(key)
            self._values.append(value)
            if len(self._keys) >= 2 * BLOCK_ENTRIES:
                self._spill()

    def _spill(self) -> None:
        """Move the tail's oldest block to the file only, keeping its first entry."""
        self.flush()
        self._summary_keys.append(self._keys[0])
        self._summary_values.append(self._values[0])
        del self._keys[:BLOCK_ENTRIES]
        del self._values[:BLOCK_ENTRIES]
        self._spilled += BLOCK_ENTRIES

    def _block(self, number: int) -> _Block:
        """Spilled block ``number``'s keys and values, from the shared cache or the file."""
        key = (self._generation, number)
        block = BLOCKS.get(key)
        if block is None:
            width = self._block_format.size
            data = os.pread(self._file.fd(), width, number * width)
            if len(data) != width:
                raise CorruptIndexError(
                    f"index {self._path.name}: block {number} is short ({len(data)} bytes)"
                )
            if self._key_type == "i":  # two int32 columns: one array, byte-swapped (4x faster)
                words = array("i", data)
                if sys.byteorder == "little":
                    words.byteswap()
                block = (words[0::2], words[1::2])
            else:
                flat = self._block_format.unpack(data)
                block = (array(self._key_type, flat[0::2]), array("i", flat[1::2]))
            BLOCKS.put(key, block)
        return block

    def _bisect(self, column: int, x: int, *, right: bool) -> int:
        """``bisect_right`` (or ``bisect_left``) of ``x`` in the keys (``column`` 0) or the
        values (1) of all entries; both are sorted."""
        find = bisect.bisect_right if right else bisect.bisect_left
        tail = self._keys if column == 0 else self._values
        if tail and (x > tail[0] or (right and x == tail[0])):
            return self._spilled + find(tail, x)
        if not self._spilled:
            return 0
        summary = self._summary_keys if column == 0 else self._summary_values
        number = find(summary, x) - 1
        if number < 0:
            return 0
        block = self._block(number)[column]
        return number * BLOCK_ENTRIES + find(block, x)

    def _floor(self, key: int) -> int:
        """Slot of the largest key <= ``key``; -1 if none."""
        return self._bisect(0, key, right=True) - 1

    def _truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file."""
        if count >= self.entries:
            return
        if count >= self._spilled:
            del self._keys[count - self._spilled :]
            del self._values[count - self._spilled :]
        else:
            start = (count // BLOCK_ENTRIES) * BLOCK_ENTRIES
            keys, values = self._block(start // BLOCK_ENTRIES)
            self._keys = array(self._key_type, keys[: count - start])
            self._values = array("i", values[: count - start])
            del self._summary_keys[start // BLOCK_ENTRIES :]
            del self._summary_values[start // BLOCK_ENTRIES :]
            self._spilled = start
            self._generation = next(_generations)
        if self._flushed > count:
            os.ftruncate(self._file.fd(), count * self._entry.size)
            self._flushed = count

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        """Write buffered entries to the file (no fsync; see ``sync``)."""
        total = self.entries
        if self._flushed == total:
            return
        pack = self._entry.pack
        keys, values, base = self._keys, self._values, self._spilled
        data = b"".join(pack(keys[i - base], values[i - base]) for i in range(self._flushed, total))
        os.pwrite(self._file.fd(), data, self._flushed * self._entry.size)
        self._flushed = total

    def sync(self) -> None:
        self.flush()
        os.fsync(self._file.fd())

    def dup_fd(self) -> int:
        """A duplicate descriptor for fsync from another thread (the caller closes it)."""
        return self._file.dup()

    def close(self) -> None:
        """Write out buffered entries and release the file."""
        if not self._file.closed:
            self.flush()
            self._file.close()

    def delete(self) -> None:
        """Release and remove the file (buffered entries are dropped)."""
        self._file.close()
        self._path.unlink(missing_ok=True)
