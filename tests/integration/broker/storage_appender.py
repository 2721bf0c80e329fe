"""Child process of ``test_storage_crash``: appends in ``flush.mode=sync`` until killed.

Usage: ``python storage_appender.py <partition-folder> <seed>``. Runs 8 concurrent appenders
through a ``GroupCommitter``; after each append returns, prints ``<base offset> <crc>`` of the
acknowledged batch and flushes stdout, so the parent knows exactly what was acknowledged.
"""

from __future__ import annotations

import asyncio
import random
import struct
import sys
from pathlib import Path

import crc32c

from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import FlushMode, LogConfig

_HEADER = struct.Struct(">qiibIhiqqqhii")


def make_batch(rng: random.Random) -> tuple[bytes, int]:
    """A valid batch of random size; returns it and its CRC."""
    records = rng.randint(1, 10)
    body = rng.randbytes(rng.randint(0, 3000))
    header = bytearray(
        _HEADER.pack(0, 49 + len(body), -1, 2, 0, 0, records - 1, 1, 1, -1, -1, -1, records)
    )
    crc = crc32c.crc32c(bytes(header[21:]) + body)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + body, crc


async def appender(committer: GroupCommitter, rng: random.Random) -> None:
    while True:
        batch, crc = make_batch(rng)
        info = await committer.append(batch, 0)
        sys.stdout.write(f"{info.first_offset} {crc}\n")
        sys.stdout.flush()


async def main(directory: Path, seed: int) -> None:
    config = LogConfig(flush_mode=FlushMode.SYNC, segment_bytes=256 * 1024)
    committer = GroupCommitter(Log.open(directory, config))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await asyncio.gather(*(appender(committer, random.Random(seed * 100 + i)) for i in range(8)))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
