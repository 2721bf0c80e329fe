"""How the record and group commands reach the cluster: a rest-proxy, and one-line errors.

``yak produce``, ``yak consume`` and ``yak groups`` talk to the rest-proxy given by ``--url``
(or ``YAK_URL``), else to the ``rest-proxy`` process listed in ``<data-dir>/cluster.json``
written by ``yak up``, else to ``http://127.0.0.1:9430`` (``yak up``'s default port). A
failure prints one line ``error: CODE: message`` on stderr and exits with status 1; Ctrl-C
exits with 130.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from yak.cli.secure import apply_cluster_security, cluster_api_key
from yak.errors import YakError
from yak.sdk import AsyncAdmin

__all__ = [
    "DEFAULT_PROXY_URL",
    "ApiKeyOption",
    "UrlOption",
    "admin_call",
    "proxy_url",
    "run_or_exit",
]

_T = TypeVar("_T")

DEFAULT_PROXY_URL = "http://127.0.0.1:9430"

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="YAK_URL",
        help="rest-proxy URL (default: the rest-proxy in <data-dir>/cluster.json, else "
        f"{DEFAULT_PROXY_URL}).",
    ),
]

ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="YAK_API_KEY",
        help="API key for a proxy with security on (docs/security.md).",
    ),
]


def proxy_url(url: str | None, data_dir: Path) -> str:
    """The rest-proxy to use (see the module docstring); a secure ``yak up`` cluster's CA
    becomes this process's ``YAK_TLS_CA`` default (``yak.cli.secure``)."""
    apply_cluster_security(data_dir)
    if url:
        return url
    try:
        document = json.loads((data_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return DEFAULT_PROXY_URL
    processes = document.get("processes") if isinstance(document, dict) else None
    for process in processes if isinstance(processes, list) else []:
        if isinstance(process, dict) and process.get("name") == "rest-proxy" and process.get("url"):
            return str(process["url"])
    return DEFAULT_PROXY_URL


def run_or_exit(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a CLI coroutine; a ``YakError`` prints one line and exits with status 1."""
    try:
        return asyncio.run(coroutine)
    except YakError as exc:
        typer.echo(f"error: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def admin_call(
    url: str | None,
    api_key: str | None,
    data_dir: Path,
    call: Callable[[AsyncAdmin], Awaitable[_T]],
) -> _T:
    """``call`` with an ``AsyncAdmin`` on the proxy (see ``proxy_url``), through ``run_or_exit``."""
    target = proxy_url(url, data_dir)

    async def run() -> _T:
        async with AsyncAdmin(target, api_key=cluster_api_key(api_key, data_dir)) as admin:
            return await call(admin)

    return run_or_exit(run())
