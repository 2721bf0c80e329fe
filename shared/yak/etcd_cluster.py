"""Several etcd members on 127.0.0.1 forming one cluster: for ``yak up --etcd-members`` and
for tests that kill members.

Member ``i`` is an ``EmbeddedEtcd`` named ``yak-etcd-<i>`` (the first keeps the single
server's name ``yak-etcd``, so a data folder of a one-member ``yak up`` stays valid), with its
own client and peer port and its own data folder; all are told the whole membership
(``--initial-cluster``) when the cluster is new. A member of a new cluster becomes healthy only
once a quorum of its peers runs, so ``start()`` spawns every member first and then waits for
each. ``endpoints`` is the comma-separated list services take as ``YAK_ETCD``.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Self

from yak.etcd_binary import EtcdBinary, find_etcd
from yak.etcd_server import EmbeddedEtcd, free_ports

__all__ = ["EmbeddedEtcdCluster", "initial_cluster", "member_name"]


def member_name(index: int) -> str:
    """``yak-etcd`` for the first member (a single server's name), ``yak-etcd-<i>`` after."""
    return "yak-etcd" if index == 0 else f"yak-etcd-{index}"


def initial_cluster(peer_ports: list[int], host: str = "127.0.0.1", *, tls: bool = False) -> str:
    """etcd's ``--initial-cluster`` value for members whose peers listen on ``peer_ports``
    (``https://`` with ``tls``: ``yak.etcd_peer_tls``)."""
    scheme = "https" if tls else "http"
    return ",".join(
        f"{member_name(i)}={scheme}://{host}:{port}" for i, port in enumerate(peer_ports)
    )


class EmbeddedEtcdCluster:
    """``size`` etcd members under ``root`` (``member-<i>/`` data, ``member-<i>.log``), on
    free ports unless ``ports`` gives ``(client, peer)`` per member."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        *,
        ports: list[tuple[int, int]] | None = None,
        binary: EtcdBinary | None = None,
        unsafe_no_fsync: bool = False,
        ready_timeout_s: float = 30.0,
    ) -> None:
        if size < 1:
            raise ValueError(f"an etcd cluster needs at least one member, not {size}")
        if ports is None:
            free = free_ports(2 * size)
            ports = [(free[2 * i], free[2 * i + 1]) for i in range(size)]
        if len(ports) != size:
            raise ValueError(f"{size} members need {size} port pairs, got {len(ports)}")
        binary = binary if binary is not None else find_etcd()
        cluster = initial_cluster([peer for _, peer in ports])
        self.members = [
            EmbeddedEtcd(
                Path(root) / f"member-{i}",
                client,
                peer,
                name=member_name(i),
                binary=binary,
                initial_cluster=cluster,
                unsafe_no_fsync=unsafe_no_fsync,
                ready_timeout_s=ready_timeout_s,
            )
            for i, (client, peer) in enumerate(ports)
        ]

    @property
    def endpoints(self) -> str:
        """Every member's client URL, comma-separated (``YAK_ETCD``)."""
        return ",".join(member.endpoint for member in self.members)

    def index_of(self, client_port: int) -> int:
        """The index of the member serving clients on ``client_port`` (ValueError if none):
        which member a store is talking to (``EtcdMetadataStore.port``)."""
        for index, member in enumerate(self.members):
            if member.client_port == client_port:
                return index
        raise ValueError(f"no member serves clients on port {client_port}")

    def start(self) -> Self:
        """Start every member, then wait until each is healthy (``StartupError`` if not)."""
        try:
            for member in self.members:
                member.spawn()
            for member in self.members:
                member.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for member in reversed(self.members):
            member.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
