"""The log setup of every Yak service: stdlib logging, as text or as one JSON object a line.

``configure_logging(service, level)`` installs one stderr handler on the root logger. The format
comes from ``YAK_LOG_FORMAT``:

- ``text`` (default; what ``yak up`` writes to ``<data-dir>/logs/``):
  ``2026-11-24 07:30:00,123 INFO yak_broker.server.broker: broker 0 stopped``;
- ``json`` (for log shippers; set it in containers): one object per line with ``ts`` (UTC,
  ISO 8601, milliseconds), ``level``, ``logger``, ``message``, ``service``, ``request_id``
  when the line was written while serving a request (``yak.observability.request_id``), the
  record's ``extra`` fields, and ``exc`` (the formatted traceback) for exceptions.

``YAK_ACCESS_LOG=true`` makes the HTTP middleware write one line per request (logger
``yak.access``: method, route, path, status, duration_ms, request_id); it is off by default
because it costs a write per request on the data plane.

uvicorn configures its own loggers (``uvicorn``, ``uvicorn.error``) with handlers of its own
when the server starts; ``adopt_uvicorn_loggers`` (called by the middleware at lifespan
startup) sends their lines through the root handler, so they come out in the same format.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from yak.observability.request_id import current_request_id

__all__ = [
    "ACCESS_LOGGER",
    "LOG_FORMATS",
    "JsonFormatter",
    "access_log_enabled",
    "adopt_uvicorn_loggers",
    "configure_logging",
    "log_format",
]

LOG_FORMAT_ENV = "YAK_LOG_FORMAT"
ACCESS_LOG_ENV = "YAK_ACCESS_LOG"
LOG_FORMATS = ("text", "json")
ACCESS_LOGGER = "yak.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "yak"
_TRUE = {"1", "true", "yes", "on"}

#: Attributes every ``LogRecord`` has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(
    {
        *logging.LogRecord("", 0, "", 0, "", None, None).__dict__,
        "message",
        "asctime",
        "taskName",
        "color_message",  # uvicorn's copy of the message with terminal colours
    }
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module doc)."""

    def __init__(self, service: str | None = None) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self._service is not None:
            out["service"] = self._service
        request_id = current_request_id()
        if request_id is not None:
            out["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(out, default=str).decode()


def log_format(env: Mapping[str, str] | None = None) -> str:
    """``YAK_LOG_FORMAT`` (``text`` or ``json``; default ``text``)."""
    env = os.environ if env is None else env
    value = env.get(LOG_FORMAT_ENV, "").strip().lower() or "text"
    if value not in LOG_FORMATS:
        raise ValueError(f"{LOG_FORMAT_ENV} must be text or json, got {value!r}")
    return value


def access_log_enabled(env: Mapping[str, str] | None = None) -> bool:
    """``YAK_ACCESS_LOG`` is true (one log line per HTTP request)."""
    env = os.environ if env is None else env
    return env.get(ACCESS_LOG_ENV, "").strip().lower() in _TRUE


def configure_logging(
    service: str, level: str = "info", *, env: Mapping[str, str] | None = None
) -> None:
    """Log to stderr in ``YAK_LOG_FORMAT`` at ``level`` (replaces the root's handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.name = _HANDLER_NAME
    if log_format(env) == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise


def adopt_uvicorn_loggers() -> None:
    """Route uvicorn's own lines through the root handler ``configure_logging`` installed
    (no-op when it did not run, e.g. an app served in-process by a test)."""
    if not any(h.name == _HANDLER_NAME for h in logging.getLogger().handlers):
        return
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
