"""``yak up``: the whole cluster on one machine, as child processes on 127.0.0.1.

Port layout from ``--base-port`` B (defaults in brackets for B = 9400)::

    etcd member i: client B+2i, peer B+2i+1 [9400, 9401; 9402, 9403; ...]
    coordinators B+10+i [9410, 9411]      brokers B+20+i [9420, 9421, 9422]
    rest-proxies B+30+i [9430]            console B+40 [9440]
    brokers' Kafka listeners B+50+i [9450, 9451, 9452]
    schema registry B+60 [9460] (with ``--schema-registry``)

``--brokers``, ``--coordinators`` and ``--proxies`` (1-9 each; defaults 3, 2 and 1) say how
many of each run. The first rest-proxy is named ``rest-proxy`` (the CLI's default endpoint),
the others ``rest-proxy-1``, ``rest-proxy-2`` ...; the console talks to the first.
``--schema-registry`` adds one ``schema-registry`` process (Confluent's Schema Registry API,
schemas in the same etcd: docs/schema-registry.md) and gives the rest-proxies its URL
(``YAK_SCHEMA_REGISTRY_URL``: the avro, jsonschema and protobuf formats) and the console (its
Schemas page); with ``--secure`` it speaks TLS, takes the cluster's users and ACLs, and logs
in to etcd as ``yak-schema-registry``.

``--etcd-members`` (1, 3 or 5; default 1) runs that many etcd members as one cluster, each
with its own ports and data folder (``etcd-<i>/``; a single member keeps ``etcd/``), and gives
every service all of them in ``YAK_ETCD`` (``http://127.0.0.1:9400,http://127.0.0.1:9402,...``):
a service whose member dies goes on with another (``yak.metadata.etcd_members``). A data
folder keeps the member count it was made with (etcd's membership is in its data).

Every service gets ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID`` (its index: broker id,
coordinator id) and ``YAK_DATA_DIR`` in its environment besides ``--host``/``--port``.
Data lives under ``--data-dir`` (etcd in ``etcd/``, broker i in ``broker-i/``), one log file per
process in ``logs/``; endpoints, pids, states and restart counts go to ``cluster.json``
(``yak ps`` prints them), with each broker's Kafka address and ``kafka_bootstrap``, the list
Kafka clients start from (``--bootstrap-server``; docs/kafka-protocol.md). Running ``yak up``
again on the same data dir reuses the same ids.

``yak up`` supervises (``yak.supervisor``): etcd and the services each run under a
``Supervisor``, and a process that exits on its own is reported (exit code or signal, the tail
of its log; console and ``logs/supervisor.log``, see ``yak.cli.up_status``) and started again
with the same command, id, data folder and port after a backoff of 1 s (``--restart-backoff``)
doubling to 30 s (reset once it stayed up 60 s). The 5th crash within 5 minutes gives up on
that process, loudly; the rest keep running. ``--no-restart`` only reports exits (fault drills
that want a dead process to stay dead). ``yak up`` ends by itself when no process is left
running or restarting.

etcd is the binary ``yak.etcd_binary.find_etcd`` chooses (``--etcd-binary`` or
``YAK_ETCD_BINARY``, else Debian's ``/usr/bin/etcd``); a release etcd's maintainers advise
against (below 3.4.22, 3.5.0-3.5.5) ends ``yak up`` with status 1 before anything starts,
unless ``--allow-not-recommended-etcd`` accepts it. Its version is printed and logged.

Ctrl-C (or SIGTERM, also during startup) stops every service, then etcd; a restart in
progress either finished spawning, and its process is stopped with the others, or never
spawns. The signal handlers only record the signal, tell the supervisors to stop starting
processes and poke the main thread's wake-up pipe: they take no lock.

``--secure`` (``yak.cli.secure``): a local CA and certificates under ``tls/``, every service on
TLS with the cluster secret and ``YAK_SECURITY=on``, etcd on TLS with authentication and one
user and role per service kind (``yak.etcd_auth``, set up after etcd starts), and a super-user
``admin`` whose API key goes to ``credentials.json``; the CLI finds both through
``cluster.json``. The brokers' Kafka listeners then speak SASL_SSL (the brokers' certificates,
Yak's users: docs/kafka-protocol.md, Security).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from yak.cli.secure import (
    bootstrap_admin,
    etcd_server_tls,
    secure_spec,
    setup_etcd_auth,
    write_tls_files,
)
from yak.cli.up_status import UpReport, Wakeup, kafka_address
from yak.etcd_binary import EtcdBinary, EtcdNotFoundError, NotRecommendedEtcdError, find_etcd
from yak.supervisor import ManagedProcess, ProcessSpec, RestartPolicy, StartupError, Supervisor

__all__ = ["ClusterPlan", "plan_cluster", "up"]

HOST = "127.0.0.1"
#: A broker's Kafka port is the base port + this + its index.
KAFKA_PORT_OFFSET = 50
#: The schema registry's port is the base port + this (``--schema-registry``).
SCHEMA_REGISTRY_PORT_OFFSET = 60


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """Where everything of a local cluster goes (a pure function of the options)."""

    data_dir: Path
    cluster_id: str
    etcd_client_port: int
    etcd_peer_port: int
    services: tuple[ProcessSpec, ...]
    secure: bool = False
    etcd_members: int = 1

    def etcd_ports(self, member: int) -> tuple[int, int]:
        """Member ``member``'s client and peer port."""
        return self.etcd_client_port + 2 * member, self.etcd_peer_port + 2 * member

    def etcd_member_url(self, member: int) -> str:
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{HOST}:{self.etcd_ports(member)[0]}"

    @property
    def etcd_url(self) -> str:
        """Every member's client URL, comma-separated (the services' ``YAK_ETCD``)."""
        return ",".join(self.etcd_member_url(i) for i in range(self.etcd_members))

    def etcd_data(self, member: int) -> tuple[str, Path]:
        """Member ``member``'s process name and data folder (one member: ``etcd``)."""
        if self.etcd_members == 1:
            return "etcd", self.data_dir / "etcd"
        return f"etcd-{member}", self.data_dir / f"etcd-{member}"


def _service(
    name: str, command: str, port: int, data_dir: Path, etcd_url: str, cluster_id: str
) -> ProcessSpec:
    url = f"http://{HOST}:{port}"
    node_id = name.rsplit("-", 1)[-1] if name[-1].isdigit() else "0"
    return ProcessSpec(
        name=name,
        argv=(_script(command), "--host", HOST, "--port", str(port)),
        log_path=data_dir / "logs" / f"{name}.log",
        health_url=f"{url}/healthz",
        url=url,
        env={
            "YAK_ETCD": etcd_url,
            "YAK_CLUSTER_ID": cluster_id,
            "YAK_NODE_ID": node_id,
            "YAK_DATA_DIR": str(data_dir / name),
        },
    )


def _script(command: str) -> str:
    """The console script installed next to this interpreter (works inside a venv)."""
    return str(Path(sys.executable).with_name(command))


def plan_cluster(
    data_dir: Path,
    base_port: int,
    brokers: int,
    coordinators: int,
    cluster_id: str,
    *,
    proxies: int = 1,
    secure: bool = False,
    etcd_members: int = 1,
    schema_registry: bool = False,
) -> ClusterPlan:
    """Lay out ports, data folders and commands for a local cluster."""
    if not all(1 <= count <= 9 for count in (brokers, coordinators, proxies)):
        raise typer.BadParameter("use 1-9 brokers, 1-9 coordinators and 1-9 proxies")
    if etcd_members not in (1, 3, 5):
        raise typer.BadParameter(
            f"use 1, 3 or 5 etcd members, not {etcd_members} (an even count tolerates no "
            "more failures than the odd count below it)",
            param_hint="'--etcd-members'",
        )
    etcd_url = ",".join(f"http://{HOST}:{base_port + 2 * i}" for i in range(etcd_members))
    common = (data_dir, etcd_url, cluster_id)
    specs = [
        _service(f"coordinator-{i}", "yak-coordinator", base_port + 10 + i, *common)
        for i in range(coordinators)
    ]
    specs += [
        _with_kafka_port(
            _service(f"broker-{i}", "yak-broker", base_port + 20 + i, *common),
            base_port + KAFKA_PORT_OFFSET + i,
        )
        for i in range(brokers)
    ]
    specs += [
        _service(_proxy_name(i), "yak-rest-proxy", base_port + 30 + i, *common)
        for i in range(proxies)
    ]
    console = _service("console", "yak-console", base_port + 40, *common)
    proxy_url = f"http://{HOST}:{base_port + 30}"
    specs.append(replace(console, env={**console.env, "YAK_API_URL": proxy_url}))
    if schema_registry:
        port = base_port + SCHEMA_REGISTRY_PORT_OFFSET
        registry = _service("schema-registry", "yak-schema-registry", port, *common)
        assert registry.url is not None  # _service gives every process its URL
        # The proxies' formats and the console's Schemas page.
        specs = [_with_registry(spec, registry.url) for spec in specs]
        specs.append(registry)
    if secure:
        specs = [secure_spec(spec, data_dir) for spec in specs]
    return ClusterPlan(
        data_dir, cluster_id, base_port, base_port + 1, tuple(specs), secure, etcd_members
    )


def _with_kafka_port(spec: ProcessSpec, port: int) -> ProcessSpec:
    """A broker's Kafka listener port (``--secure``: SASL_SSL, the broker's own setting), and
    no initial rebalance delay for its classic groups: Kafka's shipped server.properties sets
    ``group.initial.rebalance.delay.ms=0`` "for development and testing" (the broker's default
    stays Kafka's 3 s)."""
    env = {"YAK_KAFKA_PORT": str(port), "YAK_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
    return replace(spec, env={**spec.env, **env})


def _with_registry(spec: ProcessSpec, url: str) -> ProcessSpec:
    """A rest-proxy serves the avro, jsonschema and protobuf formats with this registry; the
    console shows its subjects."""
    if not spec.name.startswith(("rest-proxy", "console")):
        return spec
    return replace(spec, env={**spec.env, "YAK_SCHEMA_REGISTRY_URL": url})


def _proxy_name(index: int) -> str:
    """``rest-proxy`` for the first (the name the CLI looks for), then ``rest-proxy-<i>``."""
    return "rest-proxy" if index == 0 else f"rest-proxy-{index}"


def _with_console_key(spec: ProcessSpec, api_key: str) -> ProcessSpec:
    """The console samples the cluster with the admin's key (it checks its users itself)."""
    if spec.name != "console":
        return spec
    return replace(spec, env={**spec.env, "YAK_CONSOLE_API_KEY": api_key})


def _etcd_specs(plan: ClusterPlan, binary: EtcdBinary) -> list[ProcessSpec]:
    """etcd's members as supervised children, each with its data folder (kept across
    restarts); one member is ``etcd`` in ``etcd/``, several ``etcd-<i>`` in ``etcd-<i>/``."""
    # etcd's launcher brings the server stack's TLS tooling: loaded when a cluster starts, so
    # ``yak --help`` and the client commands run on the SDK's dependencies (issue 31).
    from yak.etcd_cluster import initial_cluster, member_name
    from yak.etcd_server import EmbeddedEtcd

    _check_etcd_folders(plan)
    tls = etcd_server_tls(plan.data_dir) if plan.secure else None
    peers = [plan.etcd_ports(i)[1] for i in range(plan.etcd_members)]
    specs = []
    for i in range(plan.etcd_members):
        name, data = plan.etcd_data(i)
        data.mkdir(mode=0o700, parents=True, exist_ok=True)  # the mode etcd asks for
        log_path = plan.data_dir / "logs" / f"{name}.log"
        client, peer = plan.etcd_ports(i)
        server = EmbeddedEtcd(
            data,
            client,
            peer,
            log_path,
            name=member_name(i),
            binary=binary,
            initial_cluster=initial_cluster(peers, HOST, tls=tls is not None and tls.peers),
            tls=tls,
        )
        url = plan.etcd_member_url(i)
        specs.append(
            ProcessSpec(
                name=name,
                argv=tuple(server.argv()),
                log_path=log_path,
                health_url=f"{url}/health",
                url=url,
                env=server.env(),
                ca_file=str(tls.ca_file) if tls is not None else None,
            )
        )
    return specs


def _check_etcd_folders(plan: ClusterPlan) -> None:
    """A data folder keeps the etcd member count it was made with: etcd keeps its
    membership in its data, so 1 and 3 members cannot take over each other's folders."""
    single = (plan.data_dir / "etcd" / "member").exists()
    several = (plan.data_dir / "etcd-0" / "member").exists()
    if (plan.etcd_members == 1 and several) or (plan.etcd_members > 1 and single):
        made = "several members" if several else "one member"
        raise typer.BadParameter(
            f"{plan.data_dir} holds an etcd of {made}; start with a new --data-dir, or carry "
            "the keyspace over with a snapshot restore (docs/operations.md)",
            param_hint="'--etcd-members'",
        )


def _start_etcd(etcd: Supervisor, specs: list[ProcessSpec]) -> list[ManagedProcess]:
    """Start every member at once: a member of a new cluster is healthy only once a quorum
    of its peers runs, so starting them one after the other would wait forever."""
    if len(specs) == 1:
        return [etcd.start(specs[0])]
    with ThreadPoolExecutor(len(specs), thread_name_prefix="start-etcd") as pool:
        return list(pool.map(etcd.start, specs))


def _choose_etcd(explicit: Path | None, allow_not_recommended: bool) -> EtcdBinary:
    """``find_etcd``, or status 1 with its reason (nothing is started yet)."""
    try:
        return find_etcd(explicit, allow_not_recommended=allow_not_recommended or None)
    except (EtcdNotFoundError, NotRecommendedEtcdError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@contextmanager
def _stop_signals(on_signal: Callable[[str], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call ``on_signal`` with the signal's name while the block runs."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        on_signal(signal.Signals(signum).name)

    previous = {
        signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


#: What the services import that the client package does not bring (the `server` extra).
_SERVER_MODULES = ("fastapi", "uvicorn", "aetcd", "cryptography", "jinja2", "kio")


def _require_server() -> None:
    """Exit 2 with the fix when this environment has the client package only."""
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        typer.echo(
            f"yak up runs the services, which need the server stack ({', '.join(missing)} "
            "missing here): pip install 'yak[server]'",
            err=True,
        )
        raise typer.Exit(2)


def up(
    data_dir: Annotated[Path, typer.Option(help="Folder for all data and logs.")] = Path(".yak"),
    base_port: Annotated[int, typer.Option(help="First port of the layout.")] = 9400,
    brokers: Annotated[int, typer.Option(help="Number of brokers.")] = 3,
    coordinators: Annotated[int, typer.Option(help="Number of coordinators.")] = 2,
    proxies: Annotated[int, typer.Option(help="Number of rest-proxies.")] = 1,
    etcd_members: Annotated[
        int,
        typer.Option(
            help="etcd members (1, 3 or 5); every service is given all of them and goes on "
            "when the one it talks to dies."
        ),
    ] = 1,
    cluster_id: Annotated[str, typer.Option(help="Cluster id (etcd key prefix).")] = "local",
    secure: Annotated[
        bool, typer.Option("--secure", help="TLS, a cluster secret and security on.")
    ] = False,
    schema_registry: Annotated[
        bool,
        typer.Option(
            "--schema-registry",
            help="Also run a schema registry (Confluent's API) on the base port + 60.",
        ),
    ] = False,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart/--no-restart",
            help="Restart a process that exits on its own (backoff 1-30 s; gives up at the "
            "5th crash in 5 minutes). --no-restart only reports it.",
        ),
    ] = True,
    restart_backoff: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=30.0,
            help="Seconds before the first restart of a crashed process; each next crash "
            "doubles it, up to 30 s.",
        ),
    ] = 1.0,
    etcd_binary: Annotated[
        Path | None,
        typer.Option(
            help="The etcd server to run [default: $YAK_ETCD_BINARY, else /usr/bin/etcd]."
        ),
    ] = None,
    allow_not_recommended_etcd: Annotated[
        bool,
        typer.Option(
            "--allow-not-recommended-etcd",
            help="Run an etcd below 3.4.22 or in 3.5.0-3.5.5 anyway (etcd-io/etcd#13766) "
            "[also: YAK_ETCD_ALLOW_NOT_RECOMMENDED=1].",
        ),
    ] = False,
) -> None:
    """Start a local cluster: embedded etcd and every Yak service, until Ctrl-C."""
    _require_server()
    plan = plan_cluster(
        data_dir,
        base_port,
        brokers,
        coordinators,
        cluster_id,
        proxies=proxies,
        secure=secure,
        etcd_members=etcd_members,
        schema_registry=schema_registry,
    )
    binary = _choose_etcd(etcd_binary, allow_not_recommended_etcd)
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    wakeup = Wakeup()
    report = UpReport(
        plan.data_dir, plan.cluster_id, secure=plan.secure, restart=restart, wakeup=wakeup
    )
    policy = RestartPolicy(initial_backoff_s=restart_backoff) if restart else None
    etcd = Supervisor(restart=policy, on_event=report.event)
    services = Supervisor(restart=policy, on_event=report.event)
    report.watch(etcd, services)
    stop: list[str] = []

    def on_signal(name: str) -> None:
        stop.append(name)
        services.interrupt()
        etcd.interrupt()
        wakeup.poke()

    try:
        with _stop_signals(on_signal):  # also while stopping: a second Ctrl-C cannot cut it short
            try:
                if _start(plan, binary, etcd, services, report, stop):
                    report.note(f"cluster '{plan.cluster_id}' is up (yak up pid {os.getpid()})")
                    while not stop and not report.all_down():
                        wakeup.wait()  # a signal or a supervisor event
                why = stop[0] if stop else "no process left running"
                typer.echo(f"stopping ({why}) ...")
            finally:
                report.stopping()
                services.stop_all()
                etcd.stop_all()
    finally:
        wakeup.close()
    report.write_status()
    report.note(f"stopped ({why})")
    summary = report.summary()
    if summary:
        typer.echo(summary)
    typer.echo("stopped.")


def _start(
    plan: ClusterPlan,
    binary: EtcdBinary,
    etcd: Supervisor,
    services: Supervisor,
    report: UpReport,
    stop: list[str],
) -> bool:
    """Start etcd and every service in order; False when a signal cut the start short.
    A process that does not become ready ends ``yak up`` with status 1."""
    try:
        if plan.secure:
            write_tls_files(plan.data_dir, plan.services)
        report.note(f"running {binary.describe()}")
        typer.echo(binary.describe())
        try:
            members = _start_etcd(etcd, _etcd_specs(plan, binary))
        except StartupError as exc:
            from yak.etcd_server import downgrade_hint

            hint = downgrade_hint(str(exc), plan.etcd_data(0)[1], binary)
            raise StartupError(f"{exc}{hint}") from exc
        for member in members:
            typer.echo(f"{member.spec.name:<14} {member.spec.url}  (pid {member.pid})")
        specs = plan.services
        if plan.secure and not stop:
            setup_etcd_auth(plan.data_dir, plan.etcd_url, plan.cluster_id, binary)
            api_key = bootstrap_admin(plan.data_dir, plan.etcd_url, plan.cluster_id)
            specs = tuple(_with_console_key(spec, api_key) for spec in specs)
            typer.echo(f"security on; admin's API key in {plan.data_dir / 'credentials.json'}")
        for spec in specs:
            if stop:
                return False
            process = services.start(spec)
            kafka = kafka_address(spec)
            extra = f"  kafka {kafka}" if kafka else ""
            typer.echo(f"{spec.name:<14} {spec.url}{extra}  (pid {process.pid})")
    except StartupError as exc:
        if stop:
            return False
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if stop:
        return False
    path = report.write_status()
    typer.echo(f"cluster '{plan.cluster_id}' is up; endpoints in {path}. Ctrl-C stops it.")
    return True
