"""Timestamps as the console shows them, for pages and exports alike: absolute in UTC
(``format_timestamp``) and relative to now (``format_ago``: "3 min ago")."""

from __future__ import annotations

import datetime as dt

__all__ = ["format_ago", "format_timestamp"]

_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"))


def format_timestamp(ms: int | None) -> str:
    """Milliseconds since the epoch as UTC ISO-8601 (``-`` for none or negative)."""
    if ms is None or ms < 0:
        return "-"
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_ago(ms: int | None, now_ms: int) -> str:
    """How long before ``now_ms`` the moment ``ms`` was, in its largest whole unit:
    ``just now`` (under a second), ``12 s ago``, ``3 min ago``, ``5 h ago``, ``2 d ago``
    (``-`` for none or negative; a moment a little ahead of a skewed clock is ``just now``)."""
    if ms is None or ms < 0:
        return "-"
    seconds = (now_ms - ms) // 1000
    if seconds < 1:
        return "just now"
    for size, unit in _UNITS:
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"
