"""Scheduled records (delayed delivery): the listing and cancel answers, broker and proxy alike.

``GET /api/v1/topics/{t}/partitions/{p}/scheduled?after_ms=&after_offset=&limit=`` (proxy) and
``GET /v1/scheduled/{t}/{p}`` (the leader's admin route) answer ``ScheduledRecords``: pending
schedules in due order; ``next`` holds the ``after_ms``/``after_offset`` of the next page, or
is null when this page is the last. ``DELETE .../scheduled/{offset}`` answers
``CancelledSchedule``. docs/queues.md, "Delayed and scheduled delivery".
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["CancelledSchedule", "ScheduledPage", "ScheduledRecordItem", "ScheduledRecords"]


class ScheduledRecordItem(BaseModel):
    offset: int
    #: Due time, epoch milliseconds.
    deliver_at: int


class ScheduledPage(BaseModel):
    after_ms: int
    after_offset: int


class ScheduledRecords(BaseModel):
    topic: str
    partition: int
    records: list[ScheduledRecordItem]
    next: ScheduledPage | None = None


class CancelledSchedule(BaseModel):
    topic: str
    partition: int
    offset: int
    deliver_at: int
