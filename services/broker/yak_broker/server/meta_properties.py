"""``meta.properties``: the identity of a broker data folder (cluster id and broker id).

Written on the first start; checked on every later one. A data folder started with another
cluster id or broker id is refused before anything is touched, because the replica manager
deletes local logs of topics the cluster does not know — pointing a broker at the wrong
cluster must fail loudly, not wipe its data (Kafka's ``meta.properties`` check).

Format: UTF-8 lines ``key=value`` (``version``, ``cluster.id``, ``broker.id``), written
atomically. Called once at start, before the log manager loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from yak.errors import YakError
from yak_broker.storage.checkpoint import write_atomically

__all__ = ["META_PROPERTIES_FILE", "InconsistentDataDirError", "check_meta_properties"]

META_PROPERTIES_FILE = "meta.properties"


class InconsistentDataDirError(YakError):
    """The data folder belongs to another cluster or another broker id."""

    code: ClassVar[str] = "INCONSISTENT_CLUSTER_ID"
    kafka_code: ClassVar[int] = 104


def check_meta_properties(data_dir: Path, cluster_id: str, broker_id: int) -> None:
    """Create the file, or raise InconsistentDataDirError if it names another identity."""
    path = data_dir / META_PROPERTIES_FILE
    expected = {"version": "0", "cluster.id": cluster_id, "broker.id": str(broker_id)}
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{key}={value}\n" for key, value in expected.items())
        write_atomically(path, text.encode())
        return
    found = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    for key in ("cluster.id", "broker.id"):
        if found.get(key) != expected[key]:
            raise InconsistentDataDirError(
                f"data folder {data_dir} belongs to {key} {found.get(key)!r}, "
                f"not {expected[key]!r} (see {path})",
                data_dir=str(data_dir),
            )
