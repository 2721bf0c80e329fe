"""Entry point `yak-broker`: run the broker service.

Every flag has a ``YAK_*`` environment variable (``yak up`` sets ``YAK_ETCD``,
``YAK_CLUSTER_ID``, ``YAK_NODE_ID`` and ``YAK_DATA_DIR``); see ``settings`` for the defaults.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from yak.gc_tuning import GcTuning
from yak.heap import HeapFreezer
from yak.observability.logs import configure_logging
from yak.security.audit import install_audit_handler
from yak.security.cluster_secret import load_cluster_secret
from yak.web.serve import serve
from yak.web.tls import ServerTls
from yak_broker.app import create_app
from yak_broker.server.broker import Broker
from yak_broker.settings import BrokerSettings

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak broker: stores partition replicas and serves the binary data plane.",
)


@cli.command()
def run(
    host: Annotated[str, typer.Option(envvar="YAK_HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="YAK_PORT", help="Port to bind.")] = 9092,
    data_port: Annotated[
        int,
        typer.Option(
            envvar="YAK_DATA_PORT",
            help="Port of the internal listener (Kafka framing); 0: any free port.",
        ),
    ] = 0,
    advertised_host: Annotated[
        str | None,
        typer.Option(
            envvar="YAK_ADVERTISED_HOST",
            help="Address other processes reach this broker at (default: --host).",
        ),
    ] = None,
    kafka_port: Annotated[
        int,
        typer.Option(
            envvar="YAK_KAFKA_PORT",
            help="Port of the public Kafka listener; 0: any free port; -1: none.",
        ),
    ] = 0,
    kafka_advertised_host: Annotated[
        str | None,
        typer.Option(
            envvar="YAK_KAFKA_ADVERTISED_HOST",
            help="Host Kafka clients are told to connect to (default: the registered host).",
        ),
    ] = None,
    kafka_advertised_port: Annotated[
        int | None,
        typer.Option(
            envvar="YAK_KAFKA_ADVERTISED_PORT",
            help="Port Kafka clients are told to connect to (default: the bound one).",
        ),
    ] = None,
    broker_id: Annotated[int, typer.Option(envvar="YAK_NODE_ID", help="Broker id.")] = 0,
    data_dir: Annotated[
        Path, typer.Option(envvar="YAK_DATA_DIR", help="Folder of the partition logs.")
    ] = Path(".yak-broker"),
    etcd: Annotated[
        str, typer.Option(envvar="YAK_ETCD", help="etcd URL, or several, comma-separated.")
    ] = "http://127.0.0.1:2379",
    cluster_id: Annotated[str, typer.Option(envvar="YAK_CLUSTER_ID", help="Cluster id.")] = "local",
    rack: Annotated[
        str | None, typer.Option(envvar="YAK_RACK", help="Rack of this broker.")
    ] = None,
    lease_ttl_s: Annotated[
        int, typer.Option(envvar="YAK_LEASE_TTL_S", help="Registration lease TTL, seconds.")
    ] = 6,
    replica_lag_time_max_ms: Annotated[
        int,
        typer.Option(
            envvar="YAK_REPLICA_LAG_TIME_MAX_MS",
            help="A follower not caught up for this long leaves the ISR.",
        ),
    ] = 30_000,
    controlled_shutdown_timeout_s: Annotated[
        float,
        typer.Option(
            envvar="YAK_CONTROLLED_SHUTDOWN_TIMEOUT_S",
            help="On SIGTERM, how long to wait, still serving, for leaderships to move away "
            "(a second SIGTERM stops at once).",
        ),
    ] = 10.0,
    max_open_files: Annotated[
        int | None,
        typer.Option(
            envvar="YAK_MAX_OPEN_FILES",
            help="Segment and index files kept open at once (default: half the open-files "
            "limit, 64..4096).",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(envvar="YAK_LOG_LEVEL")] = "info",
) -> None:
    """Serve the broker until SIGINT/SIGTERM (the first moves its leaderships away while it
    still serves; a second stops at once)."""
    configure_logging("broker", log_level)  # YAK_LOG_FORMAT=text|json
    tls = ServerTls.from_env()
    # The flags over the environment (``YAK_KAFKA_SECURITY_PROTOCOL``, ``YAK_SECURITY``,
    # ``YAK_SUPER_USERS``, ``YAK_QUOTA_*`` have no flag: read from the environment alone).
    settings = BrokerSettings.from_env(
        broker_id=broker_id,
        host=host,
        port=port,
        data_port=data_port,
        advertised_host=advertised_host or None,
        kafka_port=kafka_port,
        kafka_advertised_host=kafka_advertised_host or None,
        kafka_advertised_port=kafka_advertised_port,
        data_dir=data_dir,
        etcd_url=etcd,
        cluster_id=cluster_id,
        rack=rack or None,
        lease_ttl_s=lease_ttl_s,
        replica_lag_time_max_ms=replica_lag_time_max_ms,
        controlled_shutdown_timeout_s=controlled_shutdown_timeout_s,
        tls=tls is not None,
        cluster_secret=load_cluster_secret(),
        max_open_files=max_open_files,
    )
    if settings.security:
        install_audit_handler()  # the Kafka listener's failed logins and denials
    # Tens of thousands of replicas are millions of long-lived objects: keep them out of the
    # collector's full passes (``yak.heap``; a full pass held the loop up to a second).
    app = create_app(settings, heap=HeapFreezer())
    # Thresholds only: ``HeapFreezer`` freezes the broker's heap once its logs settle. A
    # freeze at the end of the lifespan ran after the broker registered and before uvicorn
    # listened: its full collection kept a broker announced (and given leaderships back)
    # with its HTTP port still closed (a rolling restart's clients met it).
    replace(GcTuning.from_env("broker"), freeze=False).apply(app)
    broker: Broker = app.state.broker
    # SIGTERM: leaderships move away while both listeners still serve, then uvicorn stops.
    serve(
        app,
        host=host,
        port=port,
        log_level=log_level,
        tls=tls,
        drain=broker.controlled_shutdown,
    )


def main() -> None:
    cli()
