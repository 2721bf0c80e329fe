"""Timestamps as the console shows them, for pages and exports alike."""

from __future__ import annotations

import datetime as dt

__all__ = ["format_timestamp"]


def format_timestamp(ms: int | None) -> str:
    """Milliseconds since the epoch as UTC ISO-8601 (``-`` for none or negative)."""
    if ms is None or ms < 0:
        return "-"
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
