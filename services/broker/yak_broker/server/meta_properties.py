"""``meta.properties``: the identity of a broker data folder (cluster id, broker id, folder id).

Written on the first start; checked on every later one. A data folder started with another
cluster id or broker id is refused before anything is touched, because the replica manager
deletes local logs of topics the cluster does not know — pointing a broker at the wrong
cluster must fail loudly, not wipe its data (Kafka's ``meta.properties`` check).

``directory.id`` (Kafka's KIP-858) is a random id drawn when the file is written, so it names
one life of the folder: a broker restarted on an empty folder (a new disk, the folder wiped)
comes back with a new id, which its registration carries. The ISR records the id each member
was in sync with (``PartitionState.isr_log_dirs``), so neither the controller nor a leader
takes the empty log for the one that was lost (docs/replication.md, "Empty-disk restarts").
A file from before the field gets an id on its next start: that folder kept its data.

Format: UTF-8 lines ``key=value`` (``version``, ``cluster.id``, ``broker.id``,
``directory.id``), written atomically. Called once at start, before the log manager loads.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import ClassVar

from yak.errors import YakError
from yak_broker.storage.checkpoint import write_atomically

__all__ = [
    "DIRECTORY_ID",
    "META_PROPERTIES_FILE",
    "InconsistentDataDirError",
    "check_meta_properties",
    "new_directory_id",
]

META_PROPERTIES_FILE = "meta.properties"


class InconsistentDataDirError(YakError):
    """The data folder belongs to another cluster or another broker id."""

    code: ClassVar[str] = "INCONSISTENT_CLUSTER_ID"
    kafka_code: ClassVar[int] = 104


DIRECTORY_ID = "directory.id"


def check_meta_properties(data_dir: Path, cluster_id: str, broker_id: int) -> str:
    """Create the file, or raise InconsistentDataDirError if it names another identity;
    returns the folder's ``directory.id`` (a new one when the folder was empty)."""
    path = data_dir / META_PROPERTIES_FILE
    expected = {"version": "0", "cluster.id": cluster_id, "broker.id": str(broker_id)}
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        return _write(path, {**expected, DIRECTORY_ID: new_directory_id()})
    found = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    for key in ("cluster.id", "broker.id"):
        if found.get(key) != expected[key]:
            raise InconsistentDataDirError(
                f"data folder {data_dir} belongs to {key} {found.get(key)!r}, "
                f"not {expected[key]!r} (see {path})",
                data_dir=str(data_dir),
            )
    if not found.get(DIRECTORY_ID):  # written by a version without it: the data is there
        return _write(path, {**found, DIRECTORY_ID: new_directory_id()})
    return found[DIRECTORY_ID]


def new_directory_id() -> str:
    """A random folder id: 64 bits, in hex (short, since every ISR entry carries one)."""
    return uuid.uuid4().hex[:16]


def _write(path: Path, fields: dict[str, str]) -> str:
    write_atomically(path, "".join(f"{key}={value}\n" for key, value in fields.items()).encode())
    return fields[DIRECTORY_ID]
