"""Files only their owner may read: keys, passwords, the cluster secret.

Standard library only, so that code which writes a secret (etcd's passwords, the admin's
credentials) does not load the certificate authority and its cryptography library.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_private"]


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file only its owner may read (mode 0600 from creation)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.chmod(path, 0o600)
