"""The message browser (``/topics/{topic}/messages``): a form, its results, and their export.

The form is a plain GET form: without JavaScript it reloads the page with the query string;
with htmx it fetches only the results fragment (``…/messages/results``). Both, and the export
routes (``…/messages/export.json`` and ``.csv``), read the same query parameters:

==============  =======================================================================
parameter       meaning
==============  =======================================================================
partition       ``all`` (default) or a partition number
start           ``newest`` (default), ``offset`` or ``timestamp``
offset          the start offset (``start=offset``)
timestamp       the start time in UTC, ``2024-05-01T12:30[:00]`` (a datetime-local
                input's value) or ms since the epoch (``start=timestamp``)
key, value      substrings of the key and the value (UTF-8)
header          ``name`` or ``name=value-substring``
ignore_case     present: the filters ignore case
format          ``auto`` (default), ``text``, ``json`` or ``hex``
limit           the page size, 1 to 500 (default 50)
cursor          where a "Next page" continues: ``partition:offset`` pairs
==============  =======================================================================

Bad input answers 400 with what was wrong; an unknown topic 404.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from yak.api.admin import TopicDescription
from yak.errors import InvalidRequestError, YakError
from yak_console import browse
from yak_console.browse import BrowsePage, Filters, Format, Start, StartKind
from yak_console.pages.common import Pages
from yak_console.runtime import ApiClients

__all__ = ["ExportDisabledError", "router"]

#: The query parameters the form sends (``cursor`` comes from the "Next page" link).
FIELDS = (
    "partition",
    "start",
    "offset",
    "timestamp",
    "key",
    "header",
    "value",
    "ignore_case",
    "format",
    "limit",
)


_E = TypeVar("_E", StartKind, Format)


class ExportDisabledError(YakError):
    """The console's configuration switched the message export off."""

    code = "CONSOLE_EXPORT_DISABLED"
    http_status = 403


@dataclass(frozen=True, slots=True)
class BrowseRequest:
    """The browse form's query, validated against the topic."""

    partitions: tuple[int, ...]
    start: Start
    filters: Filters
    fmt: Format
    limit: int
    cursor: dict[int, int] | None


def _choice(kind: type[_E], name: str, text: str) -> _E:
    try:
        return kind(text)
    except ValueError:
        allowed = ", ".join(e.value for e in kind)
        raise InvalidRequestError(f"{name} must be one of {allowed}, got {text!r}") from None


def _integer(name: str, text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRequestError(f"{name} must be a whole number {bounds}, got {text!r}")
    return value


def parse_timestamp(text: str) -> int:
    """A datetime-local value read as UTC (or an aware ISO-8601 time, or ms) → ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequestError(
            f"timestamp must be a UTC date and time like 2024-05-01T12:30:00 or milliseconds "
            f"since the epoch, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def parse_request(params: Mapping[str, str], topic: TopicDescription) -> BrowseRequest:
    """The query parameters as a ``BrowseRequest`` (``InvalidRequestError`` when bad)."""
    count = topic.partition_count
    partition = params.get("partition", "all") or "all"
    if partition == "all":
        partitions = tuple(range(count))
    else:
        chosen = _integer("partition", partition, 0)
        if chosen >= count:
            raise InvalidRequestError(
                f"topic {topic.name!r} has no partition {chosen} (it has {count})"
            )
        partitions = (chosen,)
    kind = _choice(StartKind, "start", params.get("start") or "newest")
    start = Start(kind)
    if kind is StartKind.OFFSET:
        start = Start(kind, _integer("offset", params.get("offset", ""), 0))
    elif kind is StartKind.TIMESTAMP:
        start = Start(kind, parse_timestamp(params.get("timestamp", "")))
    filters = Filters(
        key=params.get("key", ""),
        header=params.get("header", ""),
        value=params.get("value", ""),
        ignore_case=bool(params.get("ignore_case")),
        since_ms=start.value if kind is StartKind.TIMESTAMP else None,
    )
    fmt = _choice(Format, "format", params.get("format") or "auto")
    limit = _integer("page size", params.get("limit") or str(browse.DEFAULT_LIMIT), 1, 500)
    cursor = None
    if params.get("cursor"):
        try:
            cursor = browse.decode_cursor(params["cursor"])
        except ValueError:
            raise InvalidRequestError(f"cursor {params['cursor']!r} is malformed") from None
        if not set(cursor) <= set(partitions):
            raise InvalidRequestError("the cursor names partitions the form did not choose")
    return BrowseRequest(partitions, start, filters, fmt, limit, cursor)


def _form(params: Mapping[str, str]) -> dict[str, str]:
    """The form's fields as sent (to fill the form in again and build links)."""
    return {name: params[name] for name in FIELDS if params.get(name)}


def _rows(page: BrowsePage, fmt: Format) -> list[dict[str, Any]]:
    return [
        {
            "record": r,
            "key": browse.render(r.key, fmt),
            "value": browse.render(r.value, fmt),
            "headers": [
                (n, None if v is None else browse.render(v, Format.TEXT)) for n, v in r.headers
            ],
        }
        for r in page.records
    ]


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()
    runtime = pages.runtime

    async def run(api: ApiClients, topic: TopicDescription, query: BrowseRequest) -> BrowsePage:
        settings = runtime.settings
        positions = query.cursor
        if positions is None:
            logs = await runtime.sampler.topic_logs(topic.name)
            positions = await browse.start_offsets(
                api.admin,
                topic.name,
                query.partitions,
                query.start,
                query.limit,
                settings.browse_max_scan,
                known={p: (log.log_start_offset, log.high_watermark) for p, log in logs.items()},
            )
        return await browse.scan(
            api.reader,
            topic.name,
            positions,
            query.filters,
            limit=query.limit,
            max_scan=settings.browse_max_scan,
            keep_last=query.start.kind is StartKind.NEWEST and query.cursor is None,
        )

    def results_context(
        topic: TopicDescription, params: Mapping[str, str], query: BrowseRequest, page: BrowsePage
    ) -> dict[str, Any]:
        form = _form(params)
        this_page = dict(form, **({"cursor": params["cursor"]} if query.cursor else {}))
        next_page = dict(form, cursor=browse.encode_cursor(page.cursor))
        return {
            "page": page,
            "rows": _rows(page, query.fmt),
            "this_qs": urlencode(this_page),
            "next_qs": urlencode(next_page),
            "base": f"/topics/{quote(topic.name, safe='')}/messages",
        }

    @routes.get("/topics/{topic}/messages", response_class=HTMLResponse, include_in_schema=False)
    async def messages(request: Request, topic: str) -> HTMLResponse:
        api = pages.api(request)
        described = await api.admin.describe_topic(topic)
        params = request.query_params
        context: dict[str, Any] = {"topic": described, "form": _form(params), "title": topic}
        try:
            query = parse_request(params, described)
        except InvalidRequestError as exc:
            return pages.render(
                request, "browse.html", nav="topics", status_code=400, error=exc.message, **context
            )
        page = await run(api, described, query)
        context.update(results_context(described, params, query, page))
        return pages.render(request, "browse.html", nav="topics", **context)

    @routes.get(
        "/topics/{topic}/messages/results", response_class=HTMLResponse, include_in_schema=False
    )
    async def results(request: Request, topic: str) -> HTMLResponse:
        api = pages.api(request)
        described = await api.admin.describe_topic(topic)
        query = parse_request(request.query_params, described)
        page = await run(api, described, query)
        context = results_context(described, request.query_params, query, page)
        return pages.render(request, "_browse_results.html", topic=described, **context)

    async def export(request: Request, topic: str) -> tuple[BrowsePage, str]:
        if not runtime.settings.allow_export:
            raise ExportDisabledError("message export is switched off (YAK_CONSOLE_EXPORT)")
        api = pages.api(request)
        described = await api.admin.describe_topic(topic)
        page = await run(api, described, parse_request(request.query_params, described))
        first = min(page.records, key=lambda r: r.offset).offset if page.records else 0
        return page, f"{topic}-{first}-{len(page.records)}"

    @routes.get("/topics/{topic}/messages/export.json", include_in_schema=False)
    async def export_json(request: Request, topic: str) -> Response:
        page, name = await export(request, topic)
        return _attachment(browse.export_json(page.records), "application/json", f"{name}.json")

    @routes.get("/topics/{topic}/messages/export.csv", include_in_schema=False)
    async def export_csv(request: Request, topic: str) -> Response:
        page, name = await export(request, topic)
        return _attachment(browse.export_csv(page.records), "text/csv", f"{name}.csv")

    return routes


def _attachment(body: str, media_type: str, filename: str) -> Response:
    disposition = f"attachment; filename*=UTF-8''{quote(filename, safe='')}"
    return Response(
        body.encode("utf-8"),
        media_type=f"{media_type}; charset=utf-8",
        headers={"Content-Disposition": disposition},
    )
