"""The chaos shim's full disk: while filled, writes to files under its folder fail with ENOSPC
and write nothing; other files are untouched; freed, writes work again."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.chaos.shim import Shim, build_shim

_WRITER = """
import errno, os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"x" * 10)
        print("ok")
    except OSError as exc:
        print(errno.errorcode[exc.errno])
    finally:
        os.close(fd)
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_full_disk_fails_writes_under_its_folder_only(tmp_path: Path) -> None:
    data, other = tmp_path / "data", tmp_path / "other"
    data.mkdir()
    other.mkdir()
    shim = Shim(build_shim(tmp_path), tmp_path / "control", full_dir=data)

    def write() -> list[str]:
        paths = (str(data / "log"), str(other / "log"))
        done = subprocess.run(
            (sys.executable, "-c", _WRITER, *paths),
            env=shim.env(),
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout.split()

    assert write() == ["ok", "ok"]
    shim.fill()
    assert write() == ["ENOSPC", "ok"]
    assert (data / "log").stat().st_size == 10  # the refused write wrote nothing
    shim.free()
    assert write() == ["ok", "ok"]
