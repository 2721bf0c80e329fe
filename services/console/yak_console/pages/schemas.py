"""The schema pages: the registry's subjects (``/schemas``), a subject's versions with its
latest schema (``/schemas/{subject}``), one version (``/schemas/{subject}/versions/{v}``),
and a unified diff between two versions (``/schemas/{subject}/diff?old=&new=``).

Each page asks the schema registry (``YAK_SCHEMA_REGISTRY_URL``) on behalf of the request's
user, through ``yak.sdk.schema_registry``; nothing is cached. Without a registry configured
the pages say so (404 for the deeper ones). A registry error becomes the console's error page
with the registry's status and Confluent's error code (40401 subject not found ...).
The diff is difflib's unified diff of both versions' readable texts (JSON indented), each
line classed by its first character for the stylesheet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException

from yak.sdk.schema_registry import (
    SchemaRegistryClient,
    SchemaRegistryError,
    readable_text,
    schema_diff,
)
from yak_console.pages.common import Pages

__all__ = ["DiffLine", "diff_lines", "router"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a unified diff and its kind: ``add``, ``del``, ``hunk``, ``file`` or
    ``same``."""

    kind: str
    text: str


def diff_lines(lines: list[str]) -> list[DiffLine]:
    """``schema_diff``'s lines, classed (pure)."""
    classed = []
    for line in lines:
        text = line.rstrip("\n")
        if text.startswith(("---", "+++")):
            kind = "file"
        elif text.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(text[:1], "same")
        classed.append(DiffLine(kind, text))
    return classed


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()

    async def ask(request: Request, call: Callable[[SchemaRegistryClient], Awaitable[_T]]) -> _T:
        registry = pages.api(request).registry
        if registry is None:
            raise HTTPException(404, "no schema registry is configured (YAK_SCHEMA_REGISTRY_URL)")
        try:
            return await call(registry)
        except SchemaRegistryError as exc:
            raise HTTPException(exc.status, f"{exc.error_code}: {exc.message}") from None

    @routes.get("/schemas", response_class=HTMLResponse, include_in_schema=False)
    async def subjects(request: Request) -> HTMLResponse:
        found = None
        if pages.api(request).registry is not None:
            found = await ask(request, lambda r: r.subjects())
        return pages.render(request, "schemas.html", nav="schemas", title="Schemas", subjects=found)

    @routes.get("/schemas/{subject}", response_class=HTMLResponse, include_in_schema=False)
    async def subject(request: Request, subject: str) -> HTMLResponse:
        versions = await ask(request, lambda r: r.versions(subject))
        latest = await ask(request, lambda r: r.version(subject, "latest"))
        level = await ask(request, lambda r: r.compatibility(subject))
        return pages.render(
            request,
            "schema_subject.html",
            nav="schemas",
            title=subject,
            subject=subject,
            versions=versions,
            schema=latest,
            text=readable_text(latest),
            level=level,
        )

    @routes.get(
        "/schemas/{subject}/versions/{version}",
        response_class=HTMLResponse,
        include_in_schema=False,
    )
    async def version(request: Request, subject: str, version: str) -> HTMLResponse:
        found = await ask(request, lambda r: r.version(subject, version))
        versions = await ask(request, lambda r: r.versions(subject))
        return pages.render(
            request,
            "schema_version.html",
            nav="schemas",
            title=f"{subject} v{found.version}",
            subject=subject,
            versions=versions,
            schema=found,
            text=readable_text(found),
        )

    @routes.get("/schemas/{subject}/diff", response_class=HTMLResponse, include_in_schema=False)
    async def diff(request: Request, subject: str, old: str, new: str = "latest") -> HTMLResponse:
        before = await ask(request, lambda r: r.version(subject, old))
        after = await ask(request, lambda r: r.version(subject, new))
        versions = await ask(request, lambda r: r.versions(subject))
        return pages.render(
            request,
            "schema_diff.html",
            nav="schemas",
            title=f"{subject}: v{before.version} → v{after.version}",
            subject=subject,
            versions=versions,
            old=before,
            new=after,
            lines=diff_lines(schema_diff(before, after)),
        )

    return routes
