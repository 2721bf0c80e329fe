"""Build and drive ``shim.c``, the LD_PRELOAD library that gives one broker a slow disk, a full
disk (ENOSPC on writes under its data folder) and a wrong clock (see the C file's header for
what it intercepts).

Why a shim and not a device-mapper ``delay`` target or libfaketime: this machine's kernel has
no device-mapper (``/dev/mapper/control`` cannot be opened) and FUSE would put a user-space
file system in the way of every read; one small library, built with the system's C compiler
into the run's folder, covers both faults, changes no product code, and is switched on and
off per fault by rewriting a small control file the process re-reads every 50 ms.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Shim", "build_shim"]

SOURCE = Path(__file__).with_name("shim.c")


def build_shim(folder: Path) -> Path:
    """Compile the shim into ``folder``; its path."""
    target = folder / "yak_chaos_shim.so"
    subprocess.run(
        ("cc", "-O2", "-shared", "-fPIC", "-Wall", "-o", str(target), str(SOURCE), "-ldl"),
        check=True,
        capture_output=True,
        timeout=60,
    )
    return target


@dataclass
class Shim:
    """The control file of one process's shim: write it, the process follows within 50 ms."""

    library: Path
    control: Path
    write_delay_us: int = 0
    fsync_delay_us: int = 0
    clock_offset_ms: int = 0
    #: Writes under ``full_dir`` fail with ENOSPC while ``full`` (``fill``/``free``).
    full_dir: Path | None = None
    full: bool = False

    def __post_init__(self) -> None:
        self._store()

    def env(self) -> dict[str, str]:
        """What the process's environment needs for the shim."""
        env = {"LD_PRELOAD": str(self.library), "YAK_CHAOS_CONTROL": str(self.control)}
        if self.full_dir is not None:
            env["YAK_CHAOS_FULL_DIR"] = str(self.full_dir)
        return env

    def _store(self) -> None:
        text = (
            f"{self.write_delay_us} {self.fsync_delay_us} {self.clock_offset_ms} {int(self.full)}\n"
        )
        scratch = self.control.with_suffix(".tmp")
        scratch.write_text(text)
        os.replace(scratch, self.control)  # the process never reads half a file

    def set(self, *, write_delay_us: int, fsync_delay_us: int) -> None:
        self.write_delay_us, self.fsync_delay_us = write_delay_us, fsync_delay_us
        self._store()

    def jump(self, clock_offset_ms: int) -> None:
        self.clock_offset_ms = clock_offset_ms
        self._store()

    def fill(self) -> None:
        """The disk under ``full_dir`` is full: writes there fail with ENOSPC."""
        self.full = True
        self._store()

    def free(self) -> None:
        """Space came back under ``full_dir``."""
        self.full = False
        self._store()

    def reset(self) -> None:
        self.write_delay_us = self.fsync_delay_us = self.clock_offset_ms = 0
        self.full = False
        self._store()
