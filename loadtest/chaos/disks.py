"""Size-limited file systems for the brokers' data folders: the ``disk-full`` class's disks.

Each broker's data folder is a tmpfs of ``SIZE`` mounted by the run before the broker starts
and unmounted (lazily: a process may still hold a file) when the run ends, or by
``--cleanup`` after a killed run (the mounts are found in ``/proc/mounts`` by their source
name, ``DEVICE``). A fault fills one of them: a filler file is allocated (``fallocate``, in
1 MiB then 4 KiB steps) until the file system answers ``ENOSPC``, so every write of the
broker there fails as on a real full disk; removing the filler gives the space back.

Mounting needs root (the suite runs as root for its namespaces); where it fails the run
falls back to the LD_PRELOAD shim's full disk for broker-2 (``shim``). A namespace created by
``ip netns exec`` sees the mount: it is made before the broker starts, and ``ip`` copies the
mount table into the broker's own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DEVICE", "FILLER", "SIZE", "BrokerDisks", "unmount_leftovers"]

#: Each broker's disk: room for every class's topics, released as RAM only when used.
SIZE = "1g"
#: The source name of the suite's mounts (what ``unmount_leftovers`` looks for).
DEVICE = "yakchaos-disk"
#: The filler's name inside a full disk (not a log's name: no ``-<partition>``).
FILLER = ".chaos-filler"
_STEPS = (1 << 20, 4096)


def _run(*argv: str) -> bool:
    done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    return done.returncode == 0


def fill(folder: Path) -> int:
    """Allocate a filler in ``folder`` until its file system is full; the bytes taken."""
    taken = 0
    fd = os.open(folder / FILLER, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for step in _STEPS:
            while True:
                try:
                    os.posix_fallocate(fd, taken, step)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                taken += step
    finally:
        os.close(fd)
    return taken


def free(folder: Path) -> None:
    """Remove the filler: the space is back."""
    (folder / FILLER).unlink(missing_ok=True)


class BrokerDisks:
    """One tmpfs per broker data folder (see the module doc)."""

    def __init__(self, folders: Mapping[str, Path]) -> None:
        self.folders = dict(folders)
        self._mounted: list[Path] = []

    def mount(self) -> bool:
        """Mount every folder's disk; False (nothing left mounted) if one fails."""
        for folder in self.folders.values():
            folder.mkdir(parents=True, exist_ok=True)
            if not _run(
                "mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", DEVICE, str(folder)
            ):
                self.unmount()
                return False
            self._mounted.append(folder)
        return True

    def fill(self, node: str) -> int:
        return fill(self.folders[node])

    def free(self, node: str) -> None:
        free(self.folders[node])

    def unmount(self) -> None:
        for folder in self._mounted:
            _run("umount", "-l", str(folder))
        self._mounted = []


def unmount_leftovers() -> list[str]:
    """Unmount every disk of an earlier run still mounted; the mount points."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 1 and fields[0] == DEVICE:
                _run("umount", "-l", fields[1])
                found.append(fields[1])
    return found
