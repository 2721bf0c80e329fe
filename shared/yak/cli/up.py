"""``yak up``: the whole cluster on one machine, as child processes on 127.0.0.1.

Port layout from ``--base-port`` B (defaults in brackets for B = 9400)::

    etcd client B [9400], etcd peer B+1 [9401]
    coordinators B+10+i [9410, 9411]      brokers B+20+i [9420, 9421, 9422]
    rest-proxies B+30+i [9430]            console B+40 [9440]

``--brokers``, ``--coordinators`` and ``--proxies`` (1-9 each; defaults 3, 2 and 1) say how
many of each run. The first rest-proxy is named ``rest-proxy`` (the CLI's default endpoint),
the others ``rest-proxy-1``, ``rest-proxy-2`` ...; the console talks to the first.

Every service gets ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID`` (its index: broker id,
coordinator id) and ``YAK_DATA_DIR`` in its environment besides ``--host``/``--port``.
Data lives under ``--data-dir`` (etcd in ``etcd/``, broker i in ``broker-i/``), one log file per
process in ``logs/``; endpoints and pids go to ``cluster.json``. Restarting on the same data dir
reuses the same ids. A process that dies is reported and the others keep running. Ctrl-C (or
SIGTERM) stops every process, etcd last.

``--secure`` (``yak.cli.secure``): a local CA and certificates under ``tls/``, every service on
TLS with the cluster secret and ``YAK_SECURITY=on``, and a super-user ``admin`` whose API key
goes to ``credentials.json``; the CLI finds both through ``cluster.json``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from yak.cli.secure import bootstrap_admin, secure_spec, security_section, write_tls_files
from yak.etcd_server import EmbeddedEtcd
from yak.supervisor import ProcessSpec, StartupError, Supervisor

__all__ = ["ClusterPlan", "plan_cluster", "up"]

HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """Where everything of a local cluster goes (a pure function of the options)."""

    data_dir: Path
    cluster_id: str
    etcd_client_port: int
    etcd_peer_port: int
    services: tuple[ProcessSpec, ...]
    secure: bool = False

    @property
    def etcd_url(self) -> str:
        return f"http://{HOST}:{self.etcd_client_port}"


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
) -> ClusterPlan:
    """Lay out ports, data folders and commands for a local cluster."""
    if not all(1 <= count <= 9 for count in (brokers, coordinators, proxies)):
        raise typer.BadParameter("use 1-9 brokers, 1-9 coordinators and 1-9 proxies")
    common = (data_dir, f"http://{HOST}:{base_port}", cluster_id)
    specs = [
        _service(f"coordinator-{i}", "yak-coordinator", base_port + 10 + i, *common)
        for i in range(coordinators)
    ]
    specs += [
        _service(f"broker-{i}", "yak-broker", base_port + 20 + i, *common) for i in range(brokers)
    ]
    specs += [
        _service(_proxy_name(i), "yak-rest-proxy", base_port + 30 + i, *common)
        for i in range(proxies)
    ]
    console = _service("console", "yak-console", base_port + 40, *common)
    proxy_url = f"http://{HOST}:{base_port + 30}"
    specs.append(replace(console, env={**console.env, "YAK_API_URL": proxy_url}))
    if secure:
        specs = [secure_spec(spec, data_dir) for spec in specs]
    return ClusterPlan(data_dir, cluster_id, base_port, base_port + 1, tuple(specs), secure)


def _proxy_name(index: int) -> str:
    """``rest-proxy`` for the first (the name the CLI looks for), then ``rest-proxy-<i>``."""
    return "rest-proxy" if index == 0 else f"rest-proxy-{index}"


def _with_console_key(spec: ProcessSpec, api_key: str) -> ProcessSpec:
    """The console samples the cluster with the admin's key (it checks its users itself)."""
    if spec.name != "console":
        return spec
    return replace(spec, env={**spec.env, "YAK_CONSOLE_API_KEY": api_key})


def _write_cluster_file(plan: ClusterPlan, etcd: EmbeddedEtcd, supervisor: Supervisor) -> Path:
    document: dict[str, Any] = {
        "cluster_id": plan.cluster_id,
        "data_dir": str(plan.data_dir.resolve()),
        "etcd": {"url": plan.etcd_url, "pid": etcd.pid},
        "processes": [
            {"name": p.spec.name, "url": p.spec.url, "pid": p.pid, "log": str(p.spec.log_path)}
            for p in supervisor.processes
        ],
    }
    if plan.secure:
        document["security"] = security_section(plan.data_dir)
    path = plan.data_dir / "cluster.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def _wait_for_stop(supervisor: Supervisor) -> str:
    """Block until SIGINT/SIGTERM or until every child has exited; return why we stop.

    A child that dies (a crash, or a ``kill -9`` in a fault drill) is reported once and the rest
    of the cluster keeps running, as a real cluster would.
    """
    wake = threading.Event()
    reason: list[str] = []
    reported: set[int] = set()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if signum != signal.SIGCHLD:
            reason.append(signal.Signals(signum).name)
        wake.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, on_signal)
    while True:
        for process in supervisor.exited():
            if process.pid not in reported:
                reported.add(process.pid)
                typer.echo(
                    f"{process.spec.name} exited (code {process.popen.returncode}); "
                    f"log: {process.spec.log_path}",
                    err=True,
                )
        if reason:
            return reason[0]
        if len(reported) == len(supervisor.processes):
            return "every process exited"
        wake.wait()
        wake.clear()


def up(
    data_dir: Annotated[Path, typer.Option(help="Folder for all data and logs.")] = Path(".yak"),
    base_port: Annotated[int, typer.Option(help="First port of the layout.")] = 9400,
    brokers: Annotated[int, typer.Option(help="Number of brokers.")] = 3,
    coordinators: Annotated[int, typer.Option(help="Number of coordinators.")] = 2,
    proxies: Annotated[int, typer.Option(help="Number of rest-proxies.")] = 1,
    cluster_id: Annotated[str, typer.Option(help="Cluster id (etcd key prefix).")] = "local",
    secure: Annotated[
        bool, typer.Option("--secure", help="TLS, a cluster secret and security on.")
    ] = False,
) -> None:
    """Start a local cluster: embedded etcd and every Yak service, until Ctrl-C."""
    plan = plan_cluster(
        data_dir, base_port, brokers, coordinators, cluster_id, proxies=proxies, secure=secure
    )
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    if plan.secure:
        write_tls_files(plan.data_dir, plan.services)
    etcd = EmbeddedEtcd(
        data_dir=plan.data_dir / "etcd",
        client_port=plan.etcd_client_port,
        peer_port=plan.etcd_peer_port,
        log_path=plan.data_dir / "logs" / "etcd.log",
    )
    supervisor = Supervisor()
    try:
        etcd.start()
        typer.echo(f"{'etcd':<14} {plan.etcd_url}  (pid {etcd.pid})")
        services = plan.services
        if plan.secure:
            api_key = bootstrap_admin(plan.data_dir, plan.etcd_url, plan.cluster_id)
            services = tuple(_with_console_key(spec, api_key) for spec in services)
            typer.echo(f"security on; admin's API key in {plan.data_dir / 'credentials.json'}")
        for spec in services:
            process = supervisor.start(spec)
            typer.echo(f"{spec.name:<14} {spec.url}  (pid {process.pid})")
        path = _write_cluster_file(plan, etcd, supervisor)
        typer.echo(f"cluster '{plan.cluster_id}' is up; endpoints in {path}. Ctrl-C stops it.")
        why = _wait_for_stop(supervisor)
        typer.echo(f"stopping ({why}) ...")
    except StartupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        supervisor.stop_all()
        etcd.stop()
    typer.echo("stopped.")
