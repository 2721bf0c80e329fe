"""The consumer-group pages: ``/groups`` (every group, total lag live) and
``/groups/{group}`` (members, assignment, per-partition lag, lag over time, offset reset with a
preview, delete).

Both pages render from the sampler's latest sample (a brand new group the sampler has not seen
yet is described through the API). They stay live without polling: the total-lag numbers
follow the ``yak:metrics`` events, and on each event the table part asks again with the
digest of what it shows (``?since=``), answered ``204`` while nothing changed — so a page
swaps only what did (a member joining, a committed offset moving). The lag chart starts with
the samples' history and the lag the page shows, at the time it was described (so a group
that just appeared is charted from the first load).

An offset reset is the API's: "Preview" asks it with ``dry_run`` and shows, per partition,
the committed offset now, the new one and the lag after; "Apply" resets. A refusal (members
still active without ``force``, an unknown topic) is shown in place with the API's code and
message, answered with the API's 4xx status.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from yak.api.groups import GroupDescription, OffsetResetResult
from yak.api.records import INT64_MAX
from yak.errors import GroupIdNotFoundError, InvalidRequestError, YakError
from yak_console.auth.roles import Permit
from yak_console.pages.common import Pages
from yak_console.sampler import Sampler

__all__ = ["ResetArgs", "ResetRow", "parse_reset_form", "reset_rows", "router"]

ResetTo = Literal["earliest", "latest", "timestamp", "offset"]
_TARGETS: tuple[ResetTo, ...] = ("earliest", "latest", "timestamp", "offset")


@dataclass(frozen=True, slots=True)
class ResetArgs:
    """The arguments of ``AsyncAdmin.reset_offsets`` a reset form asks for."""

    to: ResetTo
    timestamp: int | None = None
    offset: int | None = None
    #: None: every topic the group has committed offsets for.
    topics: tuple[str, ...] | None = None
    force: bool = False


@dataclass(frozen=True, slots=True)
class ResetRow:
    """One partition of a reset (or its preview); ``end``/``lag_after`` None when unknown."""

    topic: str
    partition: int
    previous: int | None
    new: int
    end: int | None

    @property
    def changed(self) -> bool:
        return self.previous != self.new

    @property
    def lag_after(self) -> int | None:
        return None if self.end is None else max(0, self.end - self.new)


def _utc_ms(text: str) -> int:
    """A ``datetime-local`` value (``2024-05-01T12:30[:15]``), read as UTC, in ms."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(f"timestamp {text!r} is not a date and time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    ms = int(moment.timestamp() * 1000)
    if ms < 0:
        raise InvalidRequestError("timestamp must be after 1970-01-01")
    return ms


def parse_reset_form(fields: Mapping[str, str], checked_topics: Sequence[str] = ()) -> ResetArgs:
    """The reset form's fields (``to``, ``timestamp``, ``offset``, ``other_topics``,
    ``force``) and checked ``topic`` boxes as arguments; ``InvalidRequestError`` if they
    don't make one."""
    to = fields.get("to", "").strip()
    if to not in _TARGETS:
        raise InvalidRequestError(f"reset to {to!r}? choose one of {', '.join(_TARGETS)}")
    timestamp = offset = None
    if to == "timestamp":
        text = fields.get("timestamp", "").strip()
        if not text:
            raise InvalidRequestError("give the timestamp (UTC) to reset to")
        timestamp = _utc_ms(text)
    elif to == "offset":
        text = fields.get("offset", "").strip()
        if not (text.isascii() and text.isdigit()) or int(text) > INT64_MAX:
            raise InvalidRequestError("the offset must be a whole number, 0 or more")
        offset = int(text)
    named = [t.strip() for t in fields.get("other_topics", "").split(",")]
    topics = tuple(dict.fromkeys(t for t in (*checked_topics, *named) if t))
    return ResetArgs(
        to=to,
        timestamp=timestamp,
        offset=offset,
        topics=topics or None,
        force=fields.get("force", "") in ("on", "true", "1"),
    )


def reset_rows(result: OffsetResetResult, ends: Mapping[tuple[str, int], int]) -> list[ResetRow]:
    """The result's changes with each partition's end offset (from ``ends``) for the lag."""
    return [
        ResetRow(c.topic, c.partition, c.previous, c.new, ends.get((c.topic, c.partition)))
        for c in result.partitions
    ]


async def _end_offsets(
    sampler: Sampler, result: OffsetResetResult, group: GroupDescription
) -> dict[tuple[str, int], int]:
    """Each reset partition's end offset: the group's description has those it commits to;
    the others (a dry run's new partitions) are asked of their leaders."""
    ends = {(p.topic, p.partition): p.end_offset for p in group.partitions if p.end_offset >= 0}
    for topic in sorted({c.topic for c in result.partitions if (c.topic, c.partition) not in ends}):
        logs = await sampler.topic_logs(topic)
        ends.update({(topic, p): log.high_watermark for p, log in logs.items()})
    return ends


def _group_topics(group: GroupDescription) -> list[str]:
    """Topics the group commits to, is assigned or subscribes to (the reset form's boxes)."""
    named: set[str] = {p.topic for p in group.partitions}
    for member in group.members:
        named.update(member.subscription)
        named.update(a.topic for a in (*member.owned, *member.target))
    return sorted(named)


def _digest(parts: Iterable[str]) -> str:
    hashed = hashlib.blake2b(digest_size=8)
    for part in parts:
        hashed.update(part.encode())
        hashed.update(b"\0")
    return hashed.hexdigest()


def _is_htmx(request: Request) -> bool:
    return bool(request.headers.get("hx-request"))


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()
    sampler = pages.runtime.sampler

    async def describe(request: Request, group: str) -> tuple[GroupDescription, float]:
        """From the latest sample, or the API for a group the sampler has not seen yet (with
        security on always the API, with the user's credential); with when it was described
        (on the samples' clock: the page's lag chart starts from it)."""
        admin = pages.api(request).admin
        if pages.session(request) is None:
            sample = await sampler.current()
            found = sample.groups.get(group)
            if found is not None:
                return found, sample.at
        return await admin.describe_group(group), sampler.now()

    @routes.get("/groups", response_class=HTMLResponse, include_in_schema=False)
    async def groups(
        request: Request, since: str | None = None, deleted: str | None = None
    ) -> Response:
        sample = await sampler.current()
        listed = sorted(sample.groups.values(), key=lambda g: g.group_id)
        # The lag cells follow the events by themselves; the table changes with the rest.
        digest = _digest(
            f"{g.group_id}/{g.state}/{len(g.members)}/{len(g.partitions)}" for g in listed
        )
        if since is not None:
            if since == digest:
                return Response(status_code=204)
            return pages.render(request, "_groups_table.html", groups=listed, digest=digest)
        return pages.render(
            request, "groups.html", nav="groups", groups=listed, digest=digest, deleted=deleted
        )

    @routes.get("/groups/{group}", response_class=HTMLResponse, include_in_schema=False)
    async def group_page(request: Request, group: str, since: str | None = None) -> Response:
        if since is None:
            found, at = await describe(request, group)
            return _group_page(request, found, at, _digest([found.model_dump_json()]))
        try:
            found, _ = await describe(request, group)
        except GroupIdNotFoundError:  # deleted while the page was open: say so in place
            return pages.render(request, "_group_gone.html", group_id=group)
        digest = _digest([found.model_dump_json()])
        if since == digest:
            return Response(status_code=204)
        return pages.render(request, "_group_live.html", group=found, digest=digest)

    def _group_page(
        request: Request,
        group: GroupDescription,
        described_at: float,
        digest: str,
        status_code: int = 200,
        **extra: object,
    ) -> HTMLResponse:
        return pages.render(
            request,
            "group.html",
            nav="groups",
            status_code=status_code,
            group=group,
            described_at=described_at,
            digest=digest,
            topics=_group_topics(group),
            **extra,
        )

    @routes.post("/groups/{group}/reset", response_class=HTMLResponse, include_in_schema=False)
    async def reset(request: Request, group: str) -> Response:
        pages.require(request, Permit.RESET_OFFSETS)
        admin = pages.api(request).admin
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        checked = [v for v in form.getlist("topic") if isinstance(v, str)]
        dry_run = fields.get("action") != "apply"
        context: dict[str, Any] = {"dry_run": dry_run}
        status = 200
        try:
            args = parse_reset_form(fields, checked)
            result = await admin.reset_offsets(
                group,
                args.to,
                timestamp=args.timestamp,
                offset=args.offset,
                topics=args.topics,
                force=args.force,
                dry_run=dry_run,
            )
        except YakError as exc:
            status = exc.http_status if 400 <= exc.http_status < 500 else 400
            context.update(code=exc.code, message=exc.message)
        else:
            sample = sampler.latest if dry_run else await sampler.refresh()
            described = sample.groups.get(group) if sample else None
            group_now = described or await admin.describe_group(group)
            ends = await _end_offsets(sampler, result, group_now)
            context["rows"] = reset_rows(result, ends)
        if _is_htmx(request):
            return pages.render(request, "_group_reset_result.html", status_code=status, **context)
        found, at = await describe(request, group)
        digest = _digest([found.model_dump_json()])
        return _group_page(request, found, at, digest, status_code=status, reset=context)

    @routes.post("/groups/{group}/delete", include_in_schema=False)
    async def delete(request: Request, group: str) -> Response:
        pages.require(request, Permit.DELETE_GROUP)
        try:
            await pages.api(request).admin.delete_group(group)
        except YakError as exc:
            status = exc.http_status if 400 <= exc.http_status < 500 else 400
            if _is_htmx(request):
                return pages.render(
                    request, "_error.html", status_code=status, code=exc.code, message=exc.message
                )
            raise
        await sampler.refresh()
        target = f"/groups?deleted={group}"
        if _is_htmx(request):
            return Response(status_code=200, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)

    return routes
