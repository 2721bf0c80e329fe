"""The topic pages: the list (search, health filter), create, detail, edit configs, delete.

The list renders from the sampler's latest sample (sizes, record counts, rates) and the
``TopicDirectory`` (configs and ISR, kept between pages): one API call per page whatever the
topic count. The health filter (the banner's links) asks every topic afresh. Every change
goes through the public API, then samples again so the next page shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from yak.api.admin import TopicDescription, TopicSummary
from yak.errors import InvalidConfigError, TopicAlreadyExistsError, YakError
from yak.topic_config import CATALOGUE, validate_min_insync_replicas
from yak_console.auth.roles import Permit
from yak_console.pages.common import Pages
from yak_console.pages.topic_forms import (
    FormErrors,
    TopicHealth,
    config_edit,
    field_of,
    format_duration_ms,
    new_topic,
    topic_health,
)
from yak_console.sampler import Sample

__all__ = ["TopicRow", "router"]

_HEALTH_FILTERS = ("under-replicated", "offline")


@dataclass(frozen=True, slots=True)
class TopicRow:
    """One line of the topic list."""

    name: str
    partitions: int
    replication_factor: int
    size_bytes: int
    records: int
    retention: str
    produce_rate: float
    health: TopicHealth | None
    deleting: bool


def _rows(
    listed: list[TopicSummary], described: dict[str, TopicDescription], sample: Sample
) -> list[TopicRow]:
    rows = []
    for summary in sorted(listed, key=lambda t: t.name):
        found = described.get(summary.name)
        totals = sample.topics.get(summary.name)
        retention = found.configs.get("retention.ms") if found else None
        rows.append(
            TopicRow(
                name=summary.name,
                partitions=summary.partitions,
                replication_factor=summary.replication_factor,
                size_bytes=totals.size_bytes if totals else 0,
                records=totals.records if totals else 0,
                retention=format_duration_ms(
                    (retention or CATALOGUE["retention.ms"].default) if found else None
                ),
                produce_rate=sample.topic_produce_rates.get(summary.name, 0.0),
                health=topic_health(found) if found else None,
                deleting=summary.deleting,
            )
        )
    return rows


def _shown(row: TopicRow, query: str, health: str) -> bool:
    if query and query.lower() not in row.name.lower():
        return False
    if health == "under-replicated":
        return row.health is not None and row.health.under_replicated > 0
    if health == "offline":
        return row.health is not None and row.health.offline > 0
    return True


def _is_fragment(request: Request, target: str) -> bool:
    headers = request.headers
    return (
        headers.get("hx-request") == "true"
        and headers.get("hx-target") == target
        and not headers.get("hx-history-restore-request")
    )


def _live_brokers(sample: Sample) -> int:
    return sample.live_brokers


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()
    sampler = pages.runtime.sampler
    directory = pages.runtime.topics

    @routes.get("/topics", response_class=HTMLResponse, include_in_schema=False)
    async def topic_list(
        request: Request,
        q: Annotated[str, Query(max_length=249)] = "",
        health: str = "",
        deleted: str = "",
    ) -> HTMLResponse:
        health = health if health in _HEALTH_FILTERS else ""
        sample = await sampler.current()
        listed = (await pages.api(request).admin.list_topics()).topics
        names = [t.name for t in listed]
        directory.retain(names)
        described = await directory.describe_all(names, fresh=bool(health))
        rows = [r for r in _rows(listed, described, sample) if _shown(r, q.strip(), health)]
        template = "_topics_table.html" if _is_fragment(request, "topics-table") else "topics.html"
        return pages.render(
            request,
            template,
            nav="topics",
            title="Topics",
            rows=rows,
            total=len(listed),
            q=q,
            health=health,
            deleted=deleted,
            sample=sample,
        )

    @routes.get("/topics/new", response_class=HTMLResponse, include_in_schema=False)
    async def create_form(request: Request) -> HTMLResponse:
        pages.require(request, Permit.CREATE_TOPIC)
        sample = await sampler.current()
        defaults = {"partitions": "3", "replication_factor": str(min(3, _live_brokers(sample)))}
        return _create_page(request, defaults, {}, 200)

    def _create_page(
        request: Request, values: dict[str, str], errors: FormErrors, status: int
    ) -> HTMLResponse:
        return pages.render(
            request,
            "topic_new.html",
            nav="topics",
            title="New topic",
            values=values,
            errors=errors,
            status_code=status,
        )

    @routes.post("/topics", include_in_schema=False)
    async def create(request: Request) -> Response:
        pages.require(request, Permit.CREATE_TOPIC)
        values = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        sample = await sampler.current()
        checked = new_topic(values, live_brokers=_live_brokers(sample))
        if isinstance(checked, dict):
            return _create_page(request, values, checked, 400)
        try:
            created = await pages.api(request).admin.create_topic(
                checked.name,
                partitions=checked.partitions,
                replication_factor=checked.replication_factor,
                configs=checked.configs,
            )
        except YakError as exc:
            where = field_of(exc)
            if where is None:
                raise
            if isinstance(exc, TopicAlreadyExistsError):
                message = f"A topic named {checked.name!r} already exists"
                return _create_page(request, values, {where: message}, 409)
            return _create_page(request, values, {where: exc.message}, 400)
        directory.remember(created)
        await sampler.refresh()
        return RedirectResponse(f"/topics/{created.name}", status_code=303)

    @routes.get("/topics/{topic}", response_class=HTMLResponse, include_in_schema=False)
    async def detail(request: Request, topic: str, saved: bool = False) -> HTMLResponse:
        described = await pages.describe_topic(request, topic)
        sample = await sampler.current()
        configs = [
            (name, described.configs.get(name, d.default), name in described.configs, d)
            for name, d in CATALOGUE.items()
        ]
        return pages.render(
            request,
            "topic_detail.html",
            nav="topics",
            title=topic,
            topic=described,
            logs=await sampler.topic_logs(topic),
            configs=configs,
            duration=format_duration_ms,
            saved=saved,
            sample=sample,
        )

    def _configs_page(
        request: Request,
        described: TopicDescription,
        values: dict[str, str],
        errors: FormErrors,
        status: int,
    ) -> HTMLResponse:
        return pages.render(
            request,
            "topic_configs.html",
            nav="topics",
            title=f"Configs of {described.name}",
            topic=described,
            catalogue=CATALOGUE,
            values=values,
            errors=errors,
            status_code=status,
        )

    @routes.get("/topics/{topic}/configs", response_class=HTMLResponse, include_in_schema=False)
    async def configs_form(request: Request, topic: str) -> HTMLResponse:
        pages.require(request, Permit.ALTER_CONFIGS)
        described = await pages.describe_topic(request, topic)
        return _configs_page(request, described, dict(described.configs), {}, 200)

    @routes.post("/topics/{topic}/configs", include_in_schema=False)
    async def edit_configs(request: Request, topic: str) -> Response:
        pages.require(request, Permit.ALTER_CONFIGS)
        values = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        described = await pages.describe_topic(request, topic)
        to_set, to_delete, errors = config_edit(values, described.configs)
        if not errors:
            merged = {k: v for k, v in described.configs.items() if k not in to_delete}
            try:
                validate_min_insync_replicas({**merged, **to_set}, described.replication_factor)
                if to_set or to_delete:
                    directory.remember(
                        await pages.api(request).admin.alter_topic_configs(
                            topic, set_configs=to_set, delete_configs=to_delete
                        )
                    )
            except InvalidConfigError as exc:
                errors[str(exc.details.get("config", "configs"))] = exc.message
        if errors:
            return _configs_page(request, described, values, errors, 400)
        await sampler.refresh()
        return RedirectResponse(f"/topics/{topic}?saved=true", status_code=303)

    def _delete_page(request: Request, topic: str, error: str | None, status: int) -> HTMLResponse:
        return pages.render(
            request,
            "topic_delete.html",
            nav="topics",
            title=f"Delete {topic}",
            topic=topic,
            error=error,
            status_code=status,
        )

    @routes.get("/topics/{topic}/delete", response_class=HTMLResponse, include_in_schema=False)
    async def delete_form(request: Request, topic: str) -> HTMLResponse:
        pages.require(request, Permit.DELETE_TOPIC)
        await pages.describe_topic(request, topic)  # an unknown topic is a 404, not a form
        return _delete_page(request, topic, None, 200)

    @routes.post("/topics/{topic}/delete", include_in_schema=False)
    async def delete(
        request: Request, topic: str, confirm: Annotated[str, Form()] = ""
    ) -> Response:
        pages.require(request, Permit.DELETE_TOPIC)
        if confirm.strip() != topic:
            message = "Type the topic's name exactly to confirm"
            return _delete_page(request, topic, message, 400)
        await pages.api(request).admin.delete_topic(topic)
        directory.forget(topic)
        await sampler.refresh()
        return RedirectResponse(f"/topics?deleted={topic}", status_code=303)

    return routes
