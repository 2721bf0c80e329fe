"""The produce page (``/topics/{topic}/produce``): one record from a form.

The form has a key (empty: no key), a value (or a null value, a tombstone), headers as one
``name: value`` a line (split at the first colon, both sides trimmed, blank lines skipped,
names may repeat) and a partition (``auto``: chosen by the producer's partitioner from the
key). The record is sent through the console's producer and its partition and offset shown in
place (htmx swaps the form's region) or, without JavaScript, on the page the POST answers.
Invalid fields answer 400 with the message beside the field; a read-only console hides the
form and refuses the POST with 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from yak.api.admin import TopicDescription
from yak.errors import YakError
from yak.sdk.records import RecordMetadata
from yak_console.auth.roles import Permit
from yak_console.pages.common import Pages

__all__ = ["MAX_RECORD_BYTES", "ProduceForm", "parse_headers", "router"]

#: The largest key + value + headers the form sends (Kafka's default max.message.bytes).
MAX_RECORD_BYTES = 1024 * 1024


def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """``name: value`` lines → header pairs (``ValueError`` naming the bad line)."""
    headers: list[tuple[str, bytes]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"line {number}: write the header as name: value")
        if not name.strip():
            raise ValueError(f"line {number}: the header has no name")
        headers.append((name.strip(), value.strip().encode("utf-8")))
    return headers


@dataclass(slots=True)
class ProduceForm:
    """The form's fields as typed, and what is wrong with them."""

    key: str = ""
    value: str = ""
    headers: str = ""
    partition: str = "auto"
    null_value: bool = False
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> ProduceForm:
        return cls(
            key=str(data.get("key", "")),
            value=str(data.get("value", "")),
            headers=str(data.get("headers", "")),
            partition=str(data.get("partition", "auto")) or "auto",
            null_value=bool(data.get("null_value")),
        )

    def validate(self, partition_count: int) -> tuple[int | None, list[tuple[str, bytes]]]:
        """The partition and headers; problems land in ``errors`` by field."""
        partition: int | None = None
        if self.partition != "auto":
            try:
                partition = int(self.partition)
            except ValueError:
                partition = -1
            if not 0 <= partition < partition_count:
                self.errors["partition"] = (
                    f"choose automatic or a partition from 0 to {partition_count - 1}"
                )
        headers: list[tuple[str, bytes]] = []
        try:
            headers = parse_headers(self.headers)
        except ValueError as exc:
            self.errors["headers"] = str(exc)
        size = len(self.key.encode()) + len(self.value.encode())
        size += sum(len(n.encode()) + len(v) for n, v in headers)
        if size > MAX_RECORD_BYTES:
            self.errors["value"] = (
                f"the record is {size:,} bytes: at most {MAX_RECORD_BYTES:,} can be sent"
            )
        return partition, headers


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()

    def show(
        request: Request,
        topic: TopicDescription,
        form: ProduceForm,
        *,
        status_code: int = 200,
        result: RecordMetadata | None = None,
        error: str = "",
    ) -> HTMLResponse:
        browse_link = ""
        if result is not None:
            query = {"partition": result.partition, "start": "offset", "offset": result.offset}
            browse_link = f"/topics/{topic.name}/messages?{urlencode(query)}"
        template = "_produce_form.html" if request.headers.get("hx-request") else "produce.html"
        return pages.render(
            request,
            template,
            nav="topics",
            status_code=status_code,
            topic=topic,
            form=form,
            result=result,
            error=error,
            browse_link=browse_link,
            title=f"Produce · {topic.name}",
        )

    @routes.get("/topics/{topic}/produce", response_class=HTMLResponse, include_in_schema=False)
    async def produce_form(request: Request, topic: str) -> HTMLResponse:
        described = await pages.api(request).admin.describe_topic(topic)
        return show(request, described, ProduceForm())

    @routes.post("/topics/{topic}/produce", response_class=HTMLResponse, include_in_schema=False)
    async def produce(request: Request, topic: str) -> HTMLResponse:
        pages.require(request, Permit.PRODUCE)
        api = pages.api(request)
        described = await api.admin.describe_topic(topic)
        form = ProduceForm.of(await request.form())
        partition, headers = form.validate(described.partition_count)
        if form.errors:
            return show(request, described, form, status_code=400)
        try:
            delivered = await api.producer().send(
                topic,
                None if form.null_value else form.value.encode("utf-8"),
                key=form.key.encode("utf-8") if form.key else None,
                headers=headers,
                partition=partition,
            )
            result = await delivered
        except YakError as exc:
            status = exc.http_status if exc.http_status >= 400 else 500
            return show(request, described, form, status_code=status, error=exc.message)
        return show(request, described, form, result=result)

    return routes
