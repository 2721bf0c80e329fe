"""kill -9 of a process appending in ``flush.mode=sync`` loses no acknowledged batch.

A real child process (``storage_appender.py``) appends with 8 concurrent producers and prints
every acknowledged batch; the parent SIGKILLs it at a random moment, reopens the log (an
unclean start: recovery runs), and checks that each acknowledged batch is there, intact, and
that the log accepts appends again. The seed is printed so a failure can be replayed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yak.record.batch_header import parse_header
from yak_broker.storage.log import FetchIsolation, Log

pytestmark = pytest.mark.integration

CHILD = Path(__file__).with_name("storage_appender.py")


def run_and_kill(directory: Path, seed: int, acks_before_kill: int) -> list[tuple[int, int]]:
    """Start the child, read acknowledgements, SIGKILL it; return every (offset, crc) acked."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(directory), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == "ready\n"
        acked: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        while len(acked) < acks_before_kill and time.monotonic() < deadline:
            line = child.stdout.readline()
            assert line, "the appender died on its own"
            offset, crc = line.split()
            acked.append((int(offset), int(crc)))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        # Lines written before the kill but not yet read are acknowledgements too.
        for line in child.stdout:
            parts = line.split()
            if len(parts) == 2:
                acked.append((int(parts[0]), int(parts[1])))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        child.stdout.close()
    return acked


@pytest.mark.parametrize("round_", range(3))
def test_sigkill_loses_no_acknowledged_sync_append(tmp_path: Path, round_: int) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    directory = tmp_path / "t-0"
    acked = run_and_kill(directory, seed, rng.randint(20, 400))
    assert acked

    log = Log.open(directory)
    try:
        assert not log.had_clean_shutdown
        for offset, crc in acked:
            records = log.read(offset, 1, FetchIsolation.LOG_END).records
            header = parse_header(records)
            assert header.base_offset == offset
            assert header.crc == crc
        end = log.log_end_offset
        assert end > max(offset for offset, _ in acked)
        assert (
            log.append(bytes(log.read(0, 1, FetchIsolation.LOG_END).records), 1).first_offset == end
        )
    finally:
        log.close()
