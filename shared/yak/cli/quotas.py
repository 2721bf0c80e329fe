"""``yak quotas``: per-principal produce and fetch byte-rate quotas (like kafka-configs
``--entity-type users --alter --add-config producer_byte_rate=...``).

Requests to the rest-proxy's ``/api/v1/security/quotas`` with ``--api-key`` (or
``YAK_API_KEY``); the key's user needs CLUSTER ALTER (listing: DESCRIBE). Each proxy enforces
the quotas on its own (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yak.api.security import QuotaBody, QuotaInfo, QuotaList
from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, proxy_url, run_or_exit
from yak.cli.secure import cluster_api_key
from yak.clients._http import segment
from yak.sdk._client import ApiClient

__all__ = ["quotas"]

quotas = typer.Typer(no_args_is_help=True, help="Set, list and delete per-principal quotas.")

_DATA_DIR = Path(".yak")
_TIMEOUT_S = 30.0
_RateOption = Annotated[
    int | None, typer.Option(min=0, help="Bytes per second (0: unlimited; unset: the default).")
]


def _client(url: str | None, data_dir: Path, api_key: str | None) -> ApiClient:
    target = proxy_url(url, data_dir)
    return ApiClient(target, timeout_s=_TIMEOUT_S, api_key=cluster_api_key(api_key, data_dir))


def _rate(value: int | None) -> str:
    return "default" if value is None else "unlimited" if value == 0 else f"{value:,} B/s"


def _print(quota: QuotaInfo) -> None:
    typer.echo(
        f"{quota.principal}  produce: {_rate(quota.produce_bytes_per_s)}  "
        f"fetch: {_rate(quota.fetch_bytes_per_s)}"
    )


@quotas.command("set")
def set_quota(
    principal: Annotated[str, typer.Argument(help="User:<name>")],
    produce: _RateOption = None,
    fetch: _RateOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Set a principal's produce and/or fetch byte rate."""

    async def run() -> QuotaInfo:
        client = _client(url, data_dir, api_key)
        body = QuotaBody(produce_bytes_per_s=produce, fetch_bytes_per_s=fetch)
        try:
            return await client.call(
                "PUT", f"/security/quotas/{segment(principal)}", QuotaInfo, body
            )
        finally:
            await client.aclose()

    _print(run_or_exit(run()))


@quotas.command("list")
def list_quotas(
    url: UrlOption = None, api_key: ApiKeyOption = None, data_dir: DataDirOption = _DATA_DIR
) -> None:
    """The proxy's defaults and every principal's override."""

    async def run() -> QuotaList:
        client = _client(url, data_dir, api_key)
        try:
            return await client.call("GET", "/security/quotas", QuotaList)
        finally:
            await client.aclose()

    listed = run_or_exit(run())
    typer.echo(
        f"defaults  produce: {_rate(listed.default_produce_bytes_per_s or 0)}  "
        f"fetch: {_rate(listed.default_fetch_bytes_per_s or 0)}"
    )
    for quota in listed.quotas:
        _print(quota)


@quotas.command("delete")
def delete_quota(
    principal: Annotated[str, typer.Argument(help="User:<name>")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Remove a principal's override (the defaults apply again)."""

    async def run() -> None:
        client = _client(url, data_dir, api_key)
        try:
            await client.call_empty("DELETE", f"/security/quotas/{segment(principal)}")
        finally:
            await client.aclose()

    run_or_exit(run())
    typer.echo(f"deleted the quota of {principal}")
