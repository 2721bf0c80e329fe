"""Segment and index files opened on demand, behind a bounded LRU of descriptors.

Kafka keeps every segment's files open for the life of the log; a broker hosting thousands of
replicas then needs three descriptors per segment and an ``RLIMIT_NOFILE`` to match (4,000
replicas held 12,027 files, issue 19). Here each storage file is a ``FileHandle``: its
descriptor is opened when a read or write needs it and stays in the broker's one
``FileHandleCache`` until the least recently used handles are closed to make room. The next use
of an evicted handle reopens its file by path, transparently. The cache never holds more than
``max_open`` descriptors: a handle is evicted before another is opened.

What it costs: nothing while the working set fits (the active segment of a partition being
produced to stays open, its use moves it to the young end); a reopen (``open`` + ``close``, a few
microseconds) per use of a file once the working set is larger than the bound.

Invariants the callers keep:

- a descriptor from ``FileHandle.fd()`` is used for the system call at hand and not kept: the
  next ``fd()`` of *another* handle may close it. Code that yields or calls out between two
  system calls (a generator over batch headers) asks ``fd()`` again before each;
- a descriptor used on another thread is a duplicate (``FileHandle.dup``), closed by that
  thread (the fsync worker: ``segment.sync_and_close``); eviction closes only the cache's own
  descriptor, so an in-flight fsync can never lose the one it uses. Duplicates are not counted
  in the bound: at most one flush per log is in flight, and it holds the files of the segments
  it syncs (usually one, the active ``.log``);
- a handle's path names its file for as long as the handle is open (not ``close``-d): files
  are renamed or unlinked only after their handles are closed (retention, truncation, the
  compaction swap, partition deletion), so a reopen never finds another file under the name.
  A reopen does not create: a file removed behind the broker's back fails loudly.

Durability: dirty pages belong to the file, not the descriptor; an fsync through a new
descriptor writes back what an evicted one wrote (Linux reports a writeback error to the next
fsync through any descriptor if nobody has seen it yet, since 4.16).

Thread-safety: none. The cache and its handles are used on the owner's thread (the broker's
event loop, and ``LogManager.open`` before it serves); only duplicates cross threads. A lock
around the LRU would not make it shareable: the descriptor ``fd()`` returns is used after the
call, so another thread's ``open`` could evict and close it meanwhile, and the number be
reused for the next file opened (a read or truncate of the wrong file). Sharing it would take
pinning each thread's handle in use; issue 19 measured no gain from loading logs on several
threads (the GIL), so loading stays on one and the hot path pays nothing (a lock alone would
almost double a hit of ``fd()``: 130 ns to 250 ns).
"""

from __future__ import annotations

import os
import resource
from collections import OrderedDict
from pathlib import Path

__all__ = ["FileHandle", "FileHandleCache", "default_max_open_files"]

#: Bounds of the default: half the soft ``RLIMIT_NOFILE``, clamped to this range.
MIN_DEFAULT_OPEN_FILES = 64
MAX_DEFAULT_OPEN_FILES = 4096


def default_max_open_files(soft_limit: int | None = None) -> int:
    """Half the soft ``RLIMIT_NOFILE`` (the process's own by default), between 64 and 4,096.

    The other half is left for sockets (clients, followers, etcd), the duplicates of in-flight
    fsyncs and short-lived files (checkpoints, snapshots, the cleaner's output): under the
    common 1,024 limit the cache keeps 512 files. Above 4,096 the gain of keeping more files
    open is small (a reopen costs microseconds) and the bound stays a number one can plan for.
    """
    if soft_limit is None:
        soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
        return MAX_DEFAULT_OPEN_FILES
    return max(MIN_DEFAULT_OPEN_FILES, min(MAX_DEFAULT_OPEN_FILES, soft_limit // 2))


class FileHandle:
    """One storage file, opened on demand through its ``FileHandleCache``."""

    __slots__ = ("_cache", "_closed", "_fd", "path")

    def __init__(self, cache: FileHandleCache, path: Path) -> None:
        self.path = path
        self._cache = cache
        self._fd = -1
        self._closed = False

    def fd(self) -> int:
        """The open descriptor (reopening the file if it was evicted); use it right away."""
        fd = self._fd
        if fd >= 0:
            self._cache._lru.move_to_end(self)
            return fd
        return self._cache._open(self, create=False)

    def dup(self) -> int:
        """A duplicate descriptor the caller owns and closes (e.g. on another thread)."""
        return os.dup(self.fd())

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is held now (False once evicted or closed)."""
        return self._fd >= 0

    @property
    def closed(self) -> bool:
        """Closed for good by ``close``; ``fd`` raises from then on."""
        return self._closed

    def close(self) -> None:
        """Release the descriptor for good (before the file is renamed or unlinked)."""
        self._closed = True
        self._cache._release(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._fd >= 0 else "evicted")
        return f"FileHandle({self.path.name!r}, {state})"


class FileHandleCache:
    """At most ``max_open`` descriptors of storage files, least recently used closed first."""

    def __init__(self, max_open: int | None = None) -> None:
        self._max_open = _checked(default_max_open_files() if max_open is None else max_open)
        self._lru: OrderedDict[FileHandle, None] = OrderedDict()
        #: Descriptors closed to make room (the next use of their file reopens it).
        self.evictions = 0
        #: Files opened, first opens and reopens.
        self.opens = 0

    @property
    def max_open(self) -> int:
        return self._max_open

    @max_open.setter
    def max_open(self, value: int) -> None:
        self._max_open = _checked(value)
        self._evict(0)

    @property
    def open_count(self) -> int:
        """Descriptors held now (never above ``max_open``)."""
        return len(self._lru)

    def open(self, path: Path) -> FileHandle:
        """A handle on ``path``, opened now (read-write, created if missing)."""
        handle = FileHandle(self, path)
        self._open(handle, create=True)
        return handle

    def handle(self, path: Path) -> FileHandle:
        """A handle on the existing file ``path``, opened at its first use (a new log's files,
        created by a worker thread: registering the log costs no system call)."""
        return FileHandle(self, path)

    def _open(self, handle: FileHandle, *, create: bool) -> int:
        if handle._closed:
            raise ValueError(f"{handle.path} was closed")
        self._evict(1)
        flags = os.O_RDWR | os.O_CREAT if create else os.O_RDWR
        fd = os.open(handle.path, flags, 0o644)
        handle._fd = fd
        self._lru[handle] = None
        self.opens += 1
        return fd

    def _evict(self, room: int) -> None:
        """Close least recently used descriptors until ``room`` more fit under the bound."""
        while self._lru and len(self._lru) + room > self._max_open:
            victim, _ = self._lru.popitem(last=False)
            fd, victim._fd = victim._fd, -1
            os.close(fd)
            self.evictions += 1

    def _release(self, handle: FileHandle) -> None:
        if handle._fd >= 0:
            del self._lru[handle]
            fd, handle._fd = handle._fd, -1
            os.close(fd)

    def __repr__(self) -> str:
        return f"FileHandleCache(open={len(self._lru)}, max={self._max_open})"


def _checked(max_open: int) -> int:
    if max_open < 1:
        raise ValueError(f"the open file bound must be >= 1, got {max_open}")
    return max_open
